# SPDX-License-Identifier: BSD-2-Clause
# The window algorithms (algorithm=fixed_window|sliding_window|sliding_log)
# in strict mode (redis=NAME), with real redis-server processes:
#
# - a local zone and a strict zone of the same policy give the same
#   answers to the same requests; Redis then holds what was admitted
#   (fixed_window: hash w, n; sliding_window: hash w, p, c; sliding_log:
#   a sorted set of "<ts>:<seq>" members), every key with a TTL;
# - the denial cache: a rejected cost (or a larger one) is rejected by the
#   zone until the retry time, without a round trip; a smaller cost that
#   fits goes to Redis;
# - refunds: when another zone of the location rejects, the window zone's
#   charge is given back by <algorithm>_refund.lua;
# - Redis down (killed, stopped) and back: throttle_on_error, then
#   decisions again, as for GCRA zones;
# - SCRIPT FLUSH: NOSCRIPT answered by EVAL, for decisions and refunds.
#
# Windows are hours (r/h) so that the seconds a block takes never change
# an expected value; a block that counts starts with hour_guard(), which
# sleeps past the turn of the hour if one is due within the block (it
# almost never is). A window turning mid-block would reset fixed_window's
# count and make sliding_window's weigh the previous one, in the local and
# the strict zone a few milliseconds apart.


use strict;
use warnings;

use Digest::SHA qw(sha1_hex);
use FindBin;
use Test::More;
use Time::HiRes qw(sleep time);

use Clock qw(hour_guard);
use RedisChecks qw(all_expire);
use Responses qw(hdr ratelimit_of);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name; hour_guard, all_expire,
# hdr and ratelimit_of come from t/lib: Clock.pm, RedisChecks.pm,
# Responses.pm)

our %SHORT = (fixed_window => 'fw', sliding_window => 'sw', sliding_log => 'sl');
our @ALGORITHMS = qw(fixed_window sliding_window sliding_log);

# SHA1 of src/scripts/NAME.lua, as the module sends it with EVALSHA.
our %SHA = map { ($_ => RedisServer::script_sha($_)) }
    map { ($_, "${_}_refund") } @ALGORITHMS, 'gcra';

sub show {
    my ($res) = @_;
    return join ' ', $res->{status} // 'none',
        map { "$_: " . (hdr($res, $_) // '-') }
            qw(RateLimit-Policy RateLimit Retry-After X-Status);
}

# The local and the strict zone's answers to the same request agree:
# status, $throttle_status, r=, the policy; t= and Retry-After (its
# presence, and its value) within a second (rounding at a second's edge).
sub same_answer {
    my ($label, $l, $s) = @_;
    my ($lz, $lr, $lt) = ratelimit_of($l);
    my ($sz, $sr, $st) = ratelimit_of($s);
    my %ok;
    $ok{status} = is($s->{status}, $l->{status}, "$label: same status");
    $ok{x_status} = is(hdr($s, 'X-Status'), hdr($l, 'X-Status'), "$label: same \$throttle_status");
    $ok{r} = ok(defined $lr && defined $sr && $lr == $sr, "$label: same r=");
    (my $lp = hdr($l, 'RateLimit-Policy') // '') =~ s/^"l_/"s_/;
    $ok{policy} = is(hdr($s, 'RateLimit-Policy'), $lp, "$label: same policy");
    $ok{t} = ok(defined $lt && defined $st && abs($lt - $st) <= 1,
                "$label: t= within a second");
    my ($la, $sa) = (hdr($l, 'Retry-After'), hdr($s, 'Retry-After'));
    $ok{retry} = ok((!defined $la && !defined $sa)
                    || (defined $la && defined $sa && abs($la - $sa) <= 1),
                    "$label: Retry-After alike (both absent, or within a second)");
    my @failed = grep { !$ok{$_} } sort keys %ok;
    diag("local:  " . show($l) . "\nstrict: " . show($s)) if @failed;
    return !@failed;
}

# The sliding_log's set: { members => [..], scores => {member => score} }.
sub zset {
    my ($redis, $key) = @_;
    my $z = $redis->cmd('ZRANGE', $key, 0, -1, 'WITHSCORES');
    my %scores = @$z;
    my @members = @$z[ grep { $_ % 2 == 0 } 0 .. $#$z ];
    return { members => \@members, scores => \%scores };
}

# Redis holds $units admitted units under $key, as the algorithm keeps
# them, with a TTL; $W is the window in us. (A TTL may exceed the exact
# end: RedisServer::ttl_slack_ms.)
sub holds {
    my ($redis, $alg, $key, $units, $W, $label) = @_;
    my $late = RedisServer::ttl_slack_ms($W);
    my $now = $redis->time_us;
    my $start = $now - $now % $W;
    my $pttl = $redis->cmd('PTTL', $key);
    if ($alg eq 'sliding_log') {
        is($redis->cmd('TYPE', $key), 'zset', "$label: $key is a sorted set");
        my $z = zset($redis, $key);
        is(scalar @{ $z->{members} }, $units, "$label: ZCARD = $units admitted units");
        my %seen;
        my @bad = grep {
            my ($ts) = /^(\d+):\d+$/;
            !defined $ts || $seen{$_}++ || $z->{scores}{$_} != $ts
        } @{ $z->{members} };
        is("@bad", '', "$label: members \"<ts>:<seq>\", unique, scored by their ts")
            or diag("@{ $z->{members} }");
        ok($pttl > 0 && $pttl <= $W / 1000 + $late, "$label: a TTL of at most the window ($pttl ms)");
        return;
    }
    is($redis->cmd('TYPE', $key), 'hash', "$label: $key is a hash");
    my %h = @{ $redis->cmd('HGETALL', $key) };
    is($h{w}, $start, "$label: w = the window's start (a multiple of $W us)");
    if ($alg eq 'fixed_window') {
        is(join(',', sort keys %h), 'n,w', "$label: fields w, n");
        is($h{n}, $units, "$label: n = $units admitted units");
        ok($pttl > 0 && $pttl <= ($start + $W - $now) / 1000 + $late,
           "$label: expires with its window ($pttl ms)");
    } else {
        is(join(',', sort keys %h), 'c,p,w', "$label: fields w, p, c");
        is($h{c}, $units, "$label: c = $units admitted units");
        is($h{p}, 0, "$label: p = 0 (nothing in the window before)");
        ok($pttl > 0 && $pttl <= ($start + 2 * $W - $now) / 1000 + $late,
           "$label: expires a window after its own ($pttl ms)")
            or diag("now $now, start $start, " . join ' ', %h);
    }
}

# Loads every script the module may send, so that nothing is answered
# NOSCRIPT (counts of EVALSHA are then the commands nginx sent, each run).
sub load_scripts {
    my ($redis) = @_;
    for my $name (sort keys %SHA) {
        my $sha = $redis->cmd('SCRIPT', 'LOAD',
                              RedisServer::script_source($name));
        die "$name.lua: SCRIPT LOAD said $sha" unless $sha eq $SHA{$name};
    }
}

# Calls of the named scripts Redis ran, from its SLOWLOG (the servers run
# with slowlog-log-slower-than 0): EVALSHA by SHA1, or EVAL of the source.
sub script_runs {
    my ($redis, $script) = @_;
    my $sha = $SHA{$script} or die "no script $script";
    my $log = $redis->cmd('SLOWLOG', 'GET', '-1');
    my $n = 0;
    for my $e (@$log) {
        my @a = @{ $e->[3] };
        my $cmd = uc $a[0];
        $n++ if ($cmd eq 'EVALSHA' && $a[1] eq $sha)
             || ($cmd eq 'EVAL' && sha1_hex($a[1]) eq $sha);
    }
    return $n;
}

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a
block with one Redis; and the server{} of a block with none of its own:
zone z limits /a.txt and /b.txt, /b.txt with throttle_on_error deny,
its $throttle_status as X-Status.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z;
    throttle_on_error deny;
}


=== TEST 1: local and strict zones of each algorithm answer alike; Redis then holds what was admitted
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=l_fw:1m rate=3r/h burst=1 algorithm=fixed_window;
throttle_zone $http_x_key zone=s_fw:1m rate=3r/h burst=1 algorithm=fixed_window redis=main;
throttle_zone $http_x_key zone=l_sw:1m rate=3r/h burst=1 algorithm=sliding_window;
throttle_zone $http_x_key zone=s_sw:1m rate=3r/h burst=1 algorithm=sliding_window redis=main;
throttle_zone $http_x_key zone=l_sl:1m rate=3r/h burst=1 algorithm=sliding_log;
throttle_zone $http_x_key zone=s_sl:1m rate=3r/h burst=1 algorithm=sliding_log redis=main;
--- config
add_header X-Status $throttle_status always;
location /l_fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=l_fw cost=$http_x_cost; }
location /s_fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=s_fw cost=$http_x_cost; }
location /l_sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=l_sw cost=$http_x_cost; }
location /s_sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=s_sw cost=$http_x_cost; }
location /l_sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=l_sl cost=$http_x_cost; }
location /s_sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=s_sl cost=$http_x_cost; }
--- requests
perl {
    main::hour_guard(15);
    main::load_scripts($redis);
    my $L = 4;    # 3r/h + burst 1: units per window
    # cost => the status and r= every zone of limit 4 gives on a fresh key
    my @seq = ([1, 200, 3], [2, 200, 1], [0, 200, 1], [1, 200, 0], [1, 429, 0],
               [5, 429, 0], [2, 429, 0], [1, 429, 0], [0, 200, 0]);
    for my $alg (@main::ALGORITHMS) {
        my $ab = $main::SHORT{$alg};
        my ($admitted, $i) = (0, 0);
        for my $step (@seq) {
            my ($c, $want_status, $want_r) = @$step;
            $i++;
            my $label = "$name: $alg request $i (cost $c)";
            my $l = request("/l_$ab/a.txt", 'X-Key' => 'k', 'X-Cost' => $c);
            my $s = request("/s_$ab/a.txt", 'X-Key' => 'k', 'X-Cost' => $c);
            my ($z, $r) = main::ratelimit_of($l);
            is(($l->{status} // 'none') . ' r=' . ($r // '-'), "$want_status r=$want_r",
               "$label: the local zone's answer");
            main::same_answer($label, $l, $s);
            $admitted += $c if ($s->{status} // 0) == 200;
        }
        is($admitted, 4, "$name: $alg: 4 units admitted");
        main::holds($redis, $alg, "throttle:s_$ab:{k}", $admitted, 3600e6, "$name: $alg");
    }
    is(join(' ', $redis->keys_matching('*')),
       'throttle:s_fw:{k} throttle:s_sl:{k} throttle:s_sw:{k}',
       "$name: one key per strict zone, none for the local ones");
}
# a cost that never fits, a cost 0 and a rejection write nothing
perl {
    for my $alg (@main::ALGORITHMS) {
        my $ab = $main::SHORT{$alg};
        my $calls = $redis->script_calls;
        my @st = map { request("/s_$ab/a.txt", 'X-Key' => 'never', 'X-Cost' => $_)->{status} }
                 5, 0;
        is("@st", '429 200', "$name: $alg: cost 5 never fits, cost 0 passes");
        is($redis->script_calls - $calls, 2, "$name: $alg: ... both decided by Redis");
        is($redis->cmd('EXISTS', "throttle:s_$ab:{never}"), 0,
           "$name: $alg: ... and nothing written");
    }
}
# several units at once: as many members as units, each its own
perl {
    my @st = map { request('/s_sl/a.txt', 'X-Key' => 'multi', 'X-Cost' => $_)->{status} }
             3, 1, 1;
    is("@st", '200 200 429', "$name: sliding_log: 3 + 1 units, then full");
    main::holds($redis, 'sliding_log', 'throttle:s_sl:{multi}', 4, 3600e6,
                "$name: sliding_log, 3 units in one request");
    my $z = main::zset($redis, 'throttle:s_sl:{multi}');
    my @seq = map { (split /:/)[1] } @{ $z->{members} };
    is(join(',', sort @seq), '0,1,2,3', "$name: sliding_log: seq 0..3 across the requests");
    main::all_expire($redis, $name);
}



=== TEST 2: the denial cache: a rejected cost is rejected without asking Redis until the retry time, with Redis's answer; other costs are asked
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=fw:1m rate=3r/h burst=0 algorithm=fixed_window redis=main;
throttle_zone $http_x_key zone=sw:1m rate=3r/h burst=0 algorithm=sliding_window redis=main;
throttle_zone $http_x_key zone=sl:1m rate=3r/h burst=0 algorithm=sliding_log redis=main;
--- config
add_header X-Status $throttle_status always;
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw cost=$http_x_cost; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw cost=$http_x_cost; }
location /sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sl cost=$http_x_cost; }
--- requests
perl {
    main::hour_guard(10);
    main::load_scripts($redis);
    for my $alg (@main::ALGORITHMS) {
        my $ab = $main::SHORT{$alg};
        my $label = "$name: $alg";
        my $req = sub {
            my ($cost) = @_;
            my $calls = $redis->script_calls;
            my $r = request("/$ab/a.txt", 'X-Key' => 'd', 'X-Cost' => $cost);
            my (undef, $rem) = main::ratelimit_of($r);
            return ($r, ($r->{status} // 'none') . ' ' . (header($r, 'X-Status') // '')
                        . ' r=' . ($rem // '-'), $redis->script_calls - $calls);
        };
        my ($r, $got, $asked) = $req->(2);
        is("$got asked=$asked", '200 PASSED r=1 asked=1', "$label: cost 2 admitted by Redis");
        ($r, $got, $asked) = $req->(2);
        is("$got asked=$asked", '429 REJECTED r=1 asked=1', "$label: cost 2 again: Redis rejects");
        my $retry = header($r, 'Retry-After');
        like($retry // '', qr/^\d+$/, "$label: ... with a Retry-After");
        # where units leave the window one by one, what remains of a
        # rejected cost 2 may grow before its retry time: Redis answers
        my $asks = $alg eq 'fixed_window' ? 0 : 1;
        my $by = $asks ? 'Redis, each time' : 'the zone, no EVALSHA';
        for my $cost (2, 2, 2) {
            ($r, $got, $asked) = $req->($cost);
            is("$got asked=$asked", "429 REJECTED r=1 asked=$asks",
               "$label: cost $cost: rejected by $by");
            ok(abs((header($r, 'Retry-After') // -9) - $retry) <= 1,
               "$label: cost $cost: ... Retry-After as Redis's ($retry)");
        }
        # a larger cost may have to wait longer than the one remembered:
        # Redis says how long, and that is remembered in turn
        ($r, $got, $asked) = $req->(3);
        is("$got asked=$asked", '429 REJECTED r=1 asked=1',
           "$label: cost 3: asked, rejected by Redis");
        my $retry3 = header($r, 'Retry-After');
        ($r, $got, $asked) = $req->(3);
        is("$got asked=$asked", "429 REJECTED r=1 asked=$asks",
           "$label: cost 3 again: rejected by $by");
        ok(abs((header($r, 'Retry-After') // -9) - $retry3) <= 1,
           "$label: cost 3: ... Retry-After as Redis's ($retry3)");
        # a cost above the limit never fits: Redis's answer, no Retry-After
        ($r, $got, $asked) = $req->(9);
        is("$got asked=$asked", '429 REJECTED r=1 asked=1',
           "$label: cost 9 (above the limit): asked, rejected by Redis");
        ok(!defined header($r, 'Retry-After'), "$label: cost 9: no Retry-After");
        ($r, $got, $asked) = $req->(1);
        is("$got asked=$asked", '200 PASSED r=0 asked=1',
           "$label: cost 1 fits: asked, and admitted by Redis");
        ($r, $got, $asked) = $req->(1);
        is("$got asked=$asked", '429 REJECTED r=0 asked=1',
           "$label: cost 1 again: Redis rejects (the admission made the zone forget)");
        ($r, $got, $asked) = $req->(1);
        is("$got asked=$asked", '429 REJECTED r=0 asked=0', "$label: ... then the zone alone");
        ($r, $got, $asked) = $req->(0);
        is("$got asked=$asked", '200 PASSED r=0 asked=1', "$label: cost 0: asked");
        main::holds($redis, $alg, "throttle:$ab:{d}", 3, 3600e6, $label);
    }
    main::all_expire($redis, $name);
}



=== TEST 3: the denial cache ends at the retry time: Redis decides again (r/s windows)
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=fw:1m rate=1r/s burst=0 algorithm=fixed_window redis=main;
throttle_zone $http_x_key zone=sl:1m rate=1r/s burst=0 algorithm=sliding_log redis=main;
--- config
add_header X-Status $throttle_status always;
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw; }
location /sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sl; }
--- requests
perl {
    main::load_scripts($redis);
    for my $ab (qw(fw sl)) {
        # from the start of a second, so that the window holds the requests
        sleep(1.02 - (time() - int(time())));
        my @st;
        my $calls = $redis->script_calls;
        push @st, request("/$ab/a.txt", 'X-Key' => 'e')->{status} for 1 .. 5;
        is("@st", '200 429 429 429 429', "$name: $ab: 1 admitted, then rejected");
        is($redis->script_calls - $calls, 2, "$name: $ab: Redis asked twice, then the cache");
        sleep 1.05;
        $calls = $redis->script_calls;
        my $r = request("/$ab/a.txt", 'X-Key' => 'e');
        is($r->{status}, 200, "$name: $ab: after the retry time: admitted");
        is($redis->script_calls - $calls, 1, "$name: $ab: ... by Redis");
    }
}



=== TEST 4: refunds: a local zone rejects, the strict window zone's charge is given back
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
# the 8 requests wait for the stopped Redis until the test has seen them
# all read (up to 5 s on a busy machine): none may time out meanwhile
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=10s;
throttle_zone $http_x_key zone=fw:1m rate=10r/h burst=0 algorithm=fixed_window redis=main;
throttle_zone $http_x_key zone=sw:1m rate=10r/h burst=0 algorithm=sliding_window redis=main;
throttle_zone $http_x_key zone=sl:1m rate=10r/h burst=0 algorithm=sliding_log redis=main;
throttle_zone $http_x_key zone=loc:1m rate=1r/m burst=0;
--- config
add_header X-Status $throttle_status always;
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw; throttle zone=loc; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw; throttle zone=loc; }
location /sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sl; throttle zone=loc; }
# cost 0, the strict zone alone: what Redis holds for the key
location /peek_fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw cost=0; }
location /peek_sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw cost=0; }
location /peek_sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sl cost=0; }
--- requests
perl {
    main::hour_guard(10);
    main::load_scripts($redis);
    for my $alg (@main::ALGORITHMS) {
        my $ab = $main::SHORT{$alg};
        my $key = "throttle:$ab:{$ab-seq}";
        # one after the other: the local zone, decided first, rejects the
        # second request before Redis is asked; Redis keeps the first's unit
        my $r = request("/$ab/a.txt", 'X-Key' => "$ab-seq");
        is(($r->{status} // 'none') . ' ' . (header($r, 'RateLimit') // ''),
           '200 "loc";r=0;t=60', "$name: $alg: the first request passes both zones");
        main::holds($redis, $alg, $key, 1, 3600e6, "$name: $alg: after the first request");
        my $calls = $redis->script_calls;
        for (1 .. 3) {
            $r = request("/$ab/a.txt", 'X-Key' => "$ab-seq");
            like(($r->{status} // 'none') . ' ' . (header($r, 'RateLimit') // ''),
                 qr/^429 "loc";r=0;t=(59|60)$/, "$name: $alg: rejected by the local zone");
        }
        # (a charge would have been answered before the 429; a refund is
        # not waited for, but would follow a charge)
        is($redis->script_calls - $calls, 0, "$name: $alg: Redis not asked");
        main::holds($redis, $alg, $key, 1, 3600e6, "$name: $alg: Redis as before");
        $r = request("/peek_$ab/a.txt", 'X-Key' => "$ab-seq");
        like(header($r, 'RateLimit') // '', qr/^"$ab";r=9;t=\d+$/,
             "$name: $alg: the strict zone counts one unit");

        # 8 at once on a fresh key while Redis is stopped: all pass the
        # local zone's look (nothing is charged there before Redis
        # answers) and wait; once Redis runs again it charges all 8, the
        # local zone admits one, and Redis gets the 7 others back
        $key = "throttle:$ab:{$ab-race}";
        my $refunds = main::script_runs($redis, "${alg}_refund");
        my $charges = main::script_runs($redis, $alg);
        $redis->pause;
        my @socks = map { ThrottleTest::connect_to($nginx) } 1 .. 8;
        syswrite $_, "GET /$ab/a.txt HTTP/1.1\r\nHost: localhost\r\n"
                   . "X-Key: $ab-race\r\nConnection: close\r\n\r\n" for @socks;
        # all 8 past the local zone's look before Redis answers one
        ok(all_read(), "$name: $alg: 8 at once: all wait for Redis");
        $redis->resume;
        my @res = map { ThrottleTest::http_read($_, { method => 'GET' }) } @socks;
        close $_ for @socks;
        is(join(' ', sort map { ($_->{status} // 'none') . ' ' . (header($_, 'RateLimit') // '') } @res),
           join(' ', '200 "loc";r=0;t=60', ('429 "loc";r=0;t=60') x 7),
           "$name: $alg: 8 at once: the local zone admits one, rejects 7");
        is(main::script_runs($redis, $alg) - $charges, 8, "$name: $alg: 8 at once: Redis charged all 8");
        ok(wait_until(2, sub { main::script_runs($redis, "${alg}_refund") - $refunds == 7 }),
           "$name: $alg: 8 at once: 7 refunds");
        main::holds($redis, $alg, $key, 1, 3600e6, "$name: $alg: 8 at once");
    }
    main::all_expire($redis, $name);
}



=== TEST 5: refunds: a strict GCRA zone rejects (in Redis, then from its cache), the window zone's charge is given back
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=fw:1m rate=10r/h burst=0 algorithm=fixed_window redis=main;
throttle_zone $http_x_key zone=sw:1m rate=10r/h burst=0 algorithm=sliding_window redis=main;
throttle_zone $http_x_key zone=sl:1m rate=10r/h burst=0 algorithm=sliding_log redis=main;
throttle_zone $http_x_gkey zone=g:1m rate=1r/m burst=0 redis=main;
--- config
add_header X-Status $throttle_status always;
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw cost=$http_x_cost; throttle zone=g; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw cost=$http_x_cost; throttle zone=g; }
location /sl/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sl cost=$http_x_cost; throttle zone=g; }
--- requests
perl {
    main::hour_guard(10);
    main::load_scripts($redis);
    for my $alg (@main::ALGORITHMS) {
        my $ab = $main::SHORT{$alg};
        my $key = "throttle:$ab:{$ab}";
        # (no key for the GCRA zone: only the window zone decides)
        my $r = request("/$ab/a.txt", 'X-Key' => $ab, 'X-Cost' => 3);
        is($r->{status}, 200, "$name: $alg: 3 units pass the window zone");
        # another node has used the GCRA zone's key up: this one does not
        # know, Redis does
        $redis->cmd('SET', "throttle:g:{$ab}", $redis->time_us + 60e6, 'PX', 60_000);
        my $before = main::script_runs($redis, "${alg}_refund");
        my @both = ('X-Key' => $ab, 'X-GKey' => $ab, 'X-Cost' => 2);
        $r = request("/$ab/a.txt", @both);
        is(($r->{status} // 'none') . ' ' . (header($r, 'RateLimit') // ''),
           '429 "g";r=0;t=60', "$name: $alg: 2 more: the GCRA zone rejects in Redis");
        ok(wait_until(2, sub { main::script_runs($redis, "${alg}_refund") == $before + 1 }),
           "$name: $alg: one ${alg}_refund.lua run");
        main::holds($redis, $alg, $key, 3, 3600e6, "$name: $alg: Redis as before");
        my $calls = $redis->script_calls;
        $r = request("/$ab/a.txt", @both);
        is($r->{status}, 429, "$name: $alg: again: the GCRA zone rejects from its cache");
        is($redis->script_calls - $calls, 0, "$name: $alg: ... no EVALSHA, nothing to refund");
        main::holds($redis, $alg, $key, 3, 3600e6, "$name: $alg: Redis as before");
    }
    # a refund is of this request's charge only: another key's units stay
    my $r = request('/sl/a.txt', 'X-Key' => 'other', 'X-Cost' => 1);
    is($r->{status}, 200, "$name: sliding_log: another key admitted");
    is($redis->cmd('ZCARD', 'throttle:sl:{other}'), 1, "$name: ... its unit stays");
    is($redis->cmd('ZCARD', 'throttle:sl:{sl}'), 3, "$name: ... and sl's 3 stay");
    main::all_expire($redis, $name);
}



=== TEST 6: fixed_window, Redis killed: throttle_on_error allow / deny within the timeout; restarted: decisions again
--- redis
redis
--- http_config
# killed: refused at once, whatever the timeout; up: 1 s, so that a busy
# machine does not turn a decision into an error
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=5r/h burst=0 algorithm=fixed_window redis=main;
--- requests
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: PASSED
perl: $redis->kill_hard;
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  no RateLimit
  no Retry-After
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  no Retry-After
  time < 0.4
perl {
    $redis->restart;
    my $i = 0;
    ok(wait_until(5, sub {
        (header(request('/a.txt', 'X-Key' => 'probe' . $i++), 'X-Status') // '') eq 'PASSED'
    }), "$name: decisions resume after the restart");
    is($redis->cmd('HGET', 'throttle:z:{probe' . ($i - 1) . '}', 'n'), 1,
       "$name: ... by Redis (the probe's window counts 1)");
}
# the new Redis started empty: k is fresh there
GET /a.txt => 200 poll 3
  > X-Key: k
  X-Status: PASSED
  RateLimit ~ ^"z";r=4;t=\d+$
GET /b.txt => 200 poll 3
  > X-Key: k
  X-Status: PASSED
  RateLimit ~ ^"z";r=3;t=\d+$
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): 



=== TEST 7: sliding_window, Redis stopped (SIGSTOP): throttle_on_error allow / deny within the timeout; SIGCONT: decisions again
--- redis
redis
--- http_config
# stopped: the timeout answers; 300 ms, not less, so that a busy machine
# does not turn a decision of the running Redis into an error. Answered
# within the timeout and 1 s (2 s for 10 at once): a request held until
# Redis runs again would wait for the client's 5 s; two busy CPUs were
# seen to add 0.4 s to one, 1.7 s to 10 at once.
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=300ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=5r/h burst=0 algorithm=sliding_window redis=main;
--- requests
GET /a.txt => 200
  > X-Key: before
  X-Status: PASSED
  RateLimit ~ ^"z";r=4;t=\d+$
perl: $redis->pause;
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  no RateLimit
  time < 1.3
GET /b.txt x2 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 1.3
perl {
    my @res = parallel_requests(10, 'GET /a.txt', 'X-Key' => 'k2');
    my %st = map { (header($_, 'X-Status') // 'none') => 1 } @res;
    is(join(',', sort keys %st), 'ERROR_ALLOWED', "$name: 10 at once while stopped: all ERROR_ALLOWED");
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @res;
    cmp_ok($max, '<', 2.3, "$name: 10 at once: the slowest in < 2.3 s");
    $redis->resume;
    my $i = 0;
    ok(wait_until(5, sub {
        (header(request('/a.txt', 'X-Key' => 'probe' . $i++), 'X-Status') // '') eq 'PASSED'
    }), "$name: decisions resume after SIGCONT");
}
GET /a.txt => 200 poll 3
  > X-Key: before
  X-Status: PASSED
  RateLimit ~ ^"z";r=3;t=\d+$
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): no reply within 300 ms



=== TEST 8: sliding_log, Redis killed: throttle_on_error allow / deny within the timeout; restarted: decisions again
--- redis
redis
--- http_config
# killed: refused at once, whatever the timeout; up: 1 s, so that a busy
# machine does not turn a decision into an error
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=5r/h burst=0 algorithm=sliding_log redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=4;t=3600
perl: $redis->kill_hard;
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  no RateLimit
  time < 0.4
GET /b.txt x2 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    $redis->restart;
    my $i = 0;
    ok(wait_until(5, sub {
        (header(request('/a.txt', 'X-Key' => 'probe' . $i++), 'X-Status') // '') eq 'PASSED'
    }), "$name: decisions resume after the restart");
    is($redis->cmd('ZCARD', 'throttle:z:{probe' . ($i - 1) . '}'), 1,
       "$name: ... by Redis (the probe's log holds 1 entry)");
}
GET /a.txt => 200 poll 3
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=4;t=3600
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): 



=== TEST 9: SCRIPT FLUSH: window scripts (decisions and refunds) are loaded again by EVAL, transparently
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=sw:1m rate=3r/h burst=0 algorithm=sliding_window redis=main;
throttle_zone $http_x_key zone=g:1m rate=1r/m burst=0 redis=main;
--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=sw;
}
location = /b.txt {
    throttle zone=sw;
    throttle zone=g;
}
--- requests
perl: main::hour_guard(5);
GET /a.txt => 200
  > X-Key: k
  RateLimit ~ ^"sw";r=2;t=\d+$
perl {
    is($redis->cmd('SCRIPT', 'FLUSH'), 'OK', "$name: SCRIPT FLUSH");
    $stash{eval} = $redis->calls('eval');
}
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit ~ ^"sw";r=1;t=\d+$
perl {
    is($redis->calls('eval') - $stash{eval}, 1, "$name: NOSCRIPT answered by one EVAL");
    $stash{eval} = $redis->calls('eval');
}
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is($redis->calls('eval') - $stash{eval}, 0, "$name: once loaded again, EVALSHA only");
    main::holds($redis, 'sliding_window', 'throttle:sw:{k}', 3, 3600e6, $name);
}
# a refund after SCRIPT FLUSH: sliding_window_refund.lua comes back by EVAL
# (the GCRA zone's key is used up by another node: Redis rejects it)
GET /a.txt => 200
  > X-Key: r
perl {
    $redis->cmd('SET', 'throttle:g:{r}', $redis->time_us + 60e6, 'PX', 60_000);
    $redis->cmd('SCRIPT', 'FLUSH');
    $stash{eval} = $redis->calls('eval');
    $stash{refunds} = main::script_runs($redis, 'sliding_window_refund');
}
GET /b.txt => 429
  > X-Key: r
  RateLimit: "g";r=0;t=60
perl {
    # (SLOWLOG shows the NOSCRIPT EVALSHA too: wait for the EVAL)
    ok(wait_until(2, sub { $redis->calls('eval') - $stash{eval} == 3 }),
       "$name: EVAL for gcra.lua, sliding_window.lua and sliding_window_refund.lua")
        or diag($redis->calls('eval') - $stash{eval} . ' EVAL');
    ok(main::script_runs($redis, 'sliding_window_refund') > $stash{refunds},
       "$name: the refund ran");
    main::holds($redis, 'sliding_window', 'throttle:sw:{r}', 1, 3600e6,
                "$name: the refund after SCRIPT FLUSH");
    main::all_expire($redis, $name);
}
