# SPDX-License-Identifier: BSD-2-Clause
# Async mode (throttle_zone ... redis=NAME sync=async [sync_interval=T]):
# the zone decides every request at once, exactly as a local zone does, and
# every sync_interval one worker sends the units charged since the last sync
# to Redis (gcra_sync.lua, one EVALSHA per up to 500 keys); Redis's answer
# replaces the zone's view. With real redis-server processes:
#
# - one node: local answers, one sync call carrying the units, the key
#   `<prefix>{<zone>:<shard>}:<key>` holding the TAT with a matching expiry, and
#   no further calls once a key has had its two syncs;
# - two nginx (2 workers each) sharing a Redis: each learns the other's
#   consumption within a few intervals, and what they admit in total stays
#   within the documented over-admission;
# - Redis killed, then started again on the same port; Redis stopped
#   (SIGSTOP): no request waits or fails, the outage is logged once, the
#   pending units reach Redis when it is back;
# - reload; a key idle past its expiry; 500 keys per script call;
#   sync_interval at its bounds; several zones in one location;
# - configuration errors.
#
# "time < 0.4": answered without waiting for Redis. A request that waited
# for the stopped Redis of block 5 would take its timeout, 500 ms; a busy
# machine can take a tenth of a second for any request.
#
# Rates are slow (1r/m) unless a test needs time to pass, so that the
# milliseconds a test takes never change an expected value; every wait is
# bounded (polls with a deadline).
#
# The two-node part is plain Test::More (the block runner starts one nginx
# per block); the rest are blocks.

use strict;
use warnings;

use Digest::SHA ();
use POSIX ();
use FindBin;
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep time);

use RedisChecks qw(async_key);
use RedisServer;
use Responses qw(hdr status_of fmt_counts);
use ThrottleTest;

require_redis_module();

our $SYNC_SCRIPT = RedisServer::script_source('gcra_sync');
our $SYNC_SHA = RedisServer::script_sha('gcra_sync');

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name; async_key, hdr, status_of
# and fmt_counts come from t/lib: RedisChecks.pm, Responses.pm)

# How many units a key's TAT is ahead of Redis's clock: (value - TIME) / T,
# T in ms; undef when the key is not there.
sub units_in {
    my ($redis, $key, $t_ms) = @_;
    $t_ms //= 60_000;
    my $tat = $redis->cmd('GET', $key);
    return undef unless defined $tat;
    return ($tat - $redis->time_us) / ($t_ms * 1000);
}

# Whether a key's TAT is N units of T ms ahead of Redis TIME, the units
# charged since $since (a time(); by default when the block's nginx
# started), so no longer ago than that: TAT - TIME in (N*T - (now -
# since), N*T]. In list context also that range and TAT - TIME (ms; undef
# when the key is not there).
sub has_units {
    my ($redis, $key, $units, $t_ms, $since) = @_;
    $since //= $ThrottleTest::Step::CURRENT->{started};
    my $tat = $redis->cmd('GET', $key);
    my $now = $redis->time_us;
    my $want = $units * $t_ms;
    my $least = $want - int(($now / 1e6 - $since) * 1000) - 1;
    my $ahead = defined $tat ? ($tat - $now) / 1000 : undef;
    my $ok = defined $ahead && $ahead > $least && $ahead <= $want;
    return wantarray ? ($ok, $least, $want, $ahead) : $ok;
}

sub holds_units {
    my ($redis, $key, $units, $t_ms, $label, $since) = @_;
    my ($ok, $least, $want, $ahead) = has_units($redis, $key, $units, $t_ms, $since);
    ok($ok, "$label: $key holds $units units (TAT - TIME in $least..$want ms)");
    diag("$key: " . (defined $ahead ? "TAT - TIME = $ahead ms, about "
                     . sprintf('%.2f', $ahead / $t_ms) . ' units'
                                    : 'absent')) unless $ok;
    return $ok;
}

# The key expires with its TAT: PTTL is TAT - TIME, or a little more (up
# to $grace ms: the key may outlive its TAT for a moment).
sub expires_with_tat {
    my ($redis, $key, $label, $grace) = @_;
    my $tat = $redis->cmd('GET', $key);
    my $pttl = $redis->cmd('PTTL', $key);
    my $ahead = defined $tat ? ($tat - $redis->time_us) / 1000 : undef;
    my $ok = ok(defined $ahead && $pttl >= $ahead - 5 && $pttl <= $ahead + $grace + 5,
                "$label: $key expires at its TAT (up to $grace ms after)");
    diag("$key: PTTL $pttl ms, TAT - TIME " . ($ahead // 'undef') . ' ms')
        unless $ok;
    return $ok;
}

sub count_lines {
    my ($text, $re) = @_;
    return scalar grep { /$re/ } split /\n/, $text;
}

# Requests with one key each (X-Key: PREFIX<i> for i in FROM..FROM+COUNT-1),
# BATCH connections at a time, all of a batch written before any is read.
# Returns { status => { code => n }, x_status => { value => n }, max }.
sub distinct_keys {
    my ($env, $uri, $prefix, $from, $count, $batch) = @_;
    my %out = (status => {}, x_status => {}, max => 0);
    my $i = $from;
    while ($i < $from + $count) {
        my $n = $from + $count - $i;
        $n = $batch if $n > $batch;
        my @socks;
        for (1 .. $n) {
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                          PeerPort => $env->{port},
                                          Proto => 'tcp', Timeout => 5);
            push @socks, [$s, $prefix . $i++];
        }
        my $t0 = time;
        for (@socks) {
            my ($s, $key) = @$_;
            next unless $s;
            syswrite $s, "GET $uri HTTP/1.1\r\nHost: localhost\r\n"
                       . "X-Key: $key\r\nConnection: close\r\n\r\n";
        }
        for (@socks) {
            my ($s) = @$_;
            unless ($s) { $out{status}{connect}++; next }
            my $r = ThrottleTest::http_read($s, { method => 'GET' });
            close $s;
            my $el = time - $t0;
            $out{max} = $el if $el > $out{max};
            $out{status}{ $r->{status} // 'error' }++;
            $out{x_status}{ $r->{headers}{'x-status'}[0] // 'none' }++;
        }
    }
    return \%out;
}

# ---------------------------------------------------------------------------
# Two nginx instances, one Redis, one async zone

sub two_nodes {
    my $redis = RedisServer->start(conf => ['slowlog-log-slower-than 0',
                                            'slowlog-max-len 10000']);
    my $port = $redis->port;

    # timeout=1s, as the blocks' default: the tests want no Redis error
    # logged, and on busy CPUs a reply can take more than 100 ms
    my %conf = (
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_key zone=shared:1m rate=1r/m burst=9 redis=main sync=async;
HTTP
        config => <<'SERVER',
add_header X-Status $throttle_status always;
location / {
    throttle zone=shared;
}
# cost 0: what the node thinks of the key, without charging it
location = /b.txt {
    throttle zone=shared cost=0;
}
SERVER
    );

    # loaded beforehand so that SLOWLOG shows no NOSCRIPT retry: each
    # call there is one that ran
    $redis->cmd('SCRIPT', 'LOAD', $SYNC_SCRIPT);

    my @logs = with_instances('two nodes', 2, \%conf,
                              sub { two_nodes_tests($redis, @_) });
    for my $i (0 .. $#logs) {
        my $log = $logs[$i];
        my $n = $i ? 'B' : 'A';
        unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
               "two nodes: node $n: no crash, alert or crit in error.log");
        unlike($log, qr/\[(warn|error)\].*(cannot sync with Redis|throttle redis)/,
               "two nodes: node $n: no Redis error logged");
    }
    $redis->stop;
}

sub two_nodes_tests {
    my ($redis, $A, $B) = @_;
    my $T = 60_000;    # ms per unit
    my $wait = \&ThrottleTest::Step::wait_until;
    my $peek = sub {
        my ($node, $key) = @_;
        return hdr(http_request($node, 'GET /b.txt', 'X-Key' => $key),
                   'RateLimit') // '(none)';
    };
    my $admit_until_429 = sub {
        my ($node, $key, $max) = @_;
        my ($admitted, $rejected, @seen) = (0, 0);
        for (1 .. $max) {
            my $r = http_request($node, 'GET /a.txt', 'X-Key' => $key);
            push @seen, status_of($r) . ' ' . (hdr($r, 'RateLimit') // '');
            if (($r->{status} // 0) == 200) { $admitted++ }
            elsif (($r->{status} // 0) == 429) { $rejected++; last }
            else { last }
        }
        return ($admitted, $rejected, @seen);
    };

    # Whether a node's view (RateLimit) says r=$r, and t= what is left of
    # $units units charged since $since: units x 60 s less no more than the
    # time since (t rounds up).
    my $view_is = sub {
        my ($view, $r, $units, $since) = @_;
        my ($vr, $vt) = $view =~ /^"shared";r=(\d+);t=(\d+)$/ or return 0;
        return $vr == $r && $vt <= $units * 60
            && $vt > $units * 60 - (time - $since) - 1;
    };

    isnt($A->{port}, $B->{port}, 'two nodes: two nginx on their own ports');
    # whose sync call is whose: each node's connections to Redis, as now
    my $nodes = sub { [worker_ports($A, $B)] };

    # -- B has touched the key (cost 0): it learns what A spent ----------
    {
        my $name = 'two nodes, B watching';
        my $since = time;
        my @r = map { http_request($A, 'GET /a.txt', 'X-Key' => 'k') } 1 .. 6;
        is(join(' ', map { status_of($_) } @r), join(' ', ('200') x 6),
           "$name: A admits 6 on a fresh key");
        is(hdr($r[-1], 'RateLimit'), '"shared";r=4;t=360',
           "$name: A's 6th answer, decided by A's zone");
        is($peek->($B, 'k'), '"shared";r=10;t=0',
           "$name: B has not heard of them yet (decided locally, at once)");

        my $t0 = time;
        my $last;
        my $ok = $wait->(2, sub { $view_is->($last = $peek->($B, 'k'), 4, 6, $since) });
        ok($ok, "$name: B learns A's 6 units (r=4)") or diag("B's view: $last");
        cmp_ok(time - $t0, '<', 1, "$name: ... within a few sync intervals ("
               . sprintf('%.2f', time - $t0) . ' s)');

        my ($admitted, $rejected, @seen) = $admit_until_429->($B, 'k', 10);
        is($admitted, 4, "$name: B admits the 4 units left, no more")
            or diag(join "\n", @seen);
        is($rejected, 1, "$name: ... then rejects") or diag(join "\n", @seen);

        # A synced its key twice and left it; a look (cost 0) makes it
        # sync again and learn B's 4
        my $before = $peek->($A, 'k');
        note("A's view before it looks again: $before");
        $t0 = time;
        $ok = $wait->(2, sub { $view_is->($last = $peek->($A, 'k'), 0, 10, $since) });
        ok($ok, "$name: A's view becomes the global one: 10 units spent (r=0)")
            or diag("A's view: $last");
        cmp_ok(time - $t0, '<', 1, "$name: ... within a few sync intervals ("
               . sprintf('%.2f', time - $t0) . ' s)');
        is(status_of(http_request($A, 'GET /a.txt', 'X-Key' => 'k')), 429,
           "$name: A rejects the key now");
        holds_units($redis, main::async_key('shared', 'k'), 10, $T, $name, $since);
    }

    # -- B has not seen the key: its first request is decided from a fresh
    #    view (the documented over-admission), then it learns -------------
    {
        my $name = 'two nodes, B not watching';
        my $since = time;
        http_request($A, 'GET /a.txt', 'X-Key' => 'u') for 1 .. 6;
        ok($wait->(2, sub { has_units($redis, main::async_key('shared', 'u'), 6, $T, $since) }),
           "$name: A's 6 units reach Redis");
        my $r = http_request($B, 'GET /a.txt', 'X-Key' => 'u');
        is(status_of($r), 200, "$name: B admits its first request");
        is(hdr($r, 'RateLimit'), '"shared";r=9;t=60',
           "$name: ... from its own zone, which had not seen the key");
        my $last;
        ok($wait->(2, sub { $view_is->($last = $peek->($B, 'u'), 3, 7, $since) }),
           "$name: B then learns the global state (7 units spent)")
            or diag("B's view: $last");
        my ($admitted, $rejected, @seen) = $admit_until_429->($B, 'u', 10);
        is($admitted, 3, "$name: B admits 3 more (4 in all), no more")
            or diag(join "\n", @seen);
        is($rejected, 1, "$name: ... then rejects");
        ok($wait->(2, sub { has_units($redis, main::async_key('shared', 'u'), 10, $T, $since) }),
           "$name: B's units reach Redis");
        holds_units($redis, main::async_key('shared', 'u'), 10, $T, $name, $since);
    }

    # -- both nodes at once on a fresh key: each may admit up to burst+1
    #    (the documented bound); Redis then holds exactly what they
    #    admitted and both views converge to it --------------------------
    {
        my $name = 'two nodes, at once';
        my $since = time;
        my @socks;
        for my $i (0 .. 39) {
            my $node = $i % 2 ? $B : $A;
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                          PeerPort => $node->{port},
                                          Proto => 'tcp', Timeout => 5);
            push @socks, [$i % 2, $s];
        }
        my $msg = "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-Key: p\r\n"
                . "Connection: close\r\n\r\n";
        syswrite $_->[1], $msg for grep { $_->[1] } @socks;
        my @admitted = (0, 0);
        my %count;
        for (@socks) {
            my ($node, $s) = @$_;
            my $res = $s ? ThrottleTest::http_read($s, { method => 'GET' })
                         : { error => 'connect' };
            close $s if $s;
            $count{ status_of($res) }++;
            $admitted[$node]++ if ($res->{status} // 0) == 200;
        }
        my $total = $admitted[0] + $admitted[1];
        note("$name: A admitted $admitted[0], B $admitted[1]");
        is(join(',', sort grep { !/^(200|429)$/ } keys %count), '',
           "$name: every answer a 200 or a 429") or diag(fmt_counts(\%count));
        ok($admitted[0] <= 10 && $admitted[1] <= 10,
           "$name: neither node admits more than burst+1 (A $admitted[0], B $admitted[1])");
        cmp_ok($total, '>=', 10, "$name: at least burst+1 in total ($total)");
        cmp_ok($total, '<=', 20, "$name: at most (nodes x (burst+1)) in total ($total)");

        my $key = main::async_key('shared', 'p');
        ok($wait->(2, sub { has_units($redis, $key, $total, $T, $since) }),
           "$name: what both admitted reaches Redis");
        ok($wait->(2, sub { $redis->synced({ $key => $total }, nodes => $nodes) }),
           "$name: each node sent its units, then synced once more");
        holds_units($redis, $key, $total, $T, "$name: no unit lost or counted twice", $since);
        for my $pair (['A', $A], ['B', $B]) {
            my ($n, $node) = @$pair;
            my $last;
            my $ok = $wait->(2, sub {
                $view_is->($last = $peek->($node, 'p'), 0, $total, $since)
            });
            ok($ok, "$name: node ${n}'s view is the global state ($total units)")
                or diag("node $n: $last");
            is(status_of(http_request($node, 'GET /a.txt', 'X-Key' => 'p')), 429,
               "$name: node $n rejects the key");
        }
    }

    # -- alternating between the nodes, 3 requests per sync interval:
    #    with syncs the nodes admit much less than twice burst+1 ----------
    {
        my $name = 'two nodes, alternating';
        my $since = time;
        my @admitted = (0, 0);
        for my $i (0 .. 39) {
            my $r = http_request($i % 2 ? $B : $A, 'GET /a.txt', 'X-Key' => 'alt');
            $admitted[$i % 2]++ if ($r->{status} // 0) == 200;
            sleep 0.03;
        }
        my $total = $admitted[0] + $admitted[1];
        note("$name: A admitted $admitted[0], B $admitted[1]");
        cmp_ok($total, '>=', 10, "$name: at least burst+1 in total ($total)");
        # without syncs each node would admit 10: 20
        cmp_ok($total, '<=', 16, "$name: nodes that sync admit far less than "
               . "2 x (burst+1) in total ($total of 40 over 1.2 s)");
        my $key = main::async_key('shared', 'alt');
        ok($wait->(2, sub { has_units($redis, $key, $total, $T, $since) }),
           "$name: the total reaches Redis");
        ok($wait->(2, sub { $redis->synced({ $key => $total }, nodes => $nodes) }),
           "$name: each node sent its units, then synced once more");
        holds_units($redis, $key, $total, $T, "$name: Redis holds exactly what was admitted", $since);
    }

    my @calls = $redis->sync_calls;
    cmp_ok(scalar(@calls), '>', 0, 'two nodes: the nodes sync with gcra_sync.lua');
    is(join(',', map { $_->{nkeys} > 500 ? $_->{nkeys} : () } @calls), '',
       'two nodes: no sync call with more than 500 keys');
}

two_nodes();

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: one node: decided at once as a local zone; one sync carries the 10 units; the key is {zone:shard}-tagged and holds the TAT
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=reply:1m rate=1r/m burst=9 redis=main sync=async;
throttle_zone $http_x_key zone=loc:1m rate=1r/m burst=9;
--- config
add_header X-Status $throttle_status always;
add_header X-Limit $throttle_limit always;
add_header X-Remaining $throttle_remaining always;
add_header X-Reset $throttle_reset always;
add_header X-Retry $throttle_retry_after always;
location / {
    throttle zone=reply;
}
location = /b.txt {
    throttle zone=loc;
}
--- requests
perl {
    # loaded beforehand so that SLOWLOG shows no NOSCRIPT retry: each
    # call there is one that ran
    is($redis->cmd('SCRIPT', 'LOAD', $main::SYNC_SCRIPT), $main::SYNC_SHA,
       "$name: gcra_sync.lua's SHA1 is the one nginx will send");
    $stash{calls0} = $redis->script_calls;
    $stash{t0} = time;
}
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "reply";q=10;w=600
  RateLimit: "reply";r=9;t=60
  no Retry-After
  X-Status: PASSED
  X-Limit: 10
  X-Remaining: 9
  X-Reset: 60
  X-Retry: 0
  body: a
  time < 0.4
GET /a.txt x8 => 200
  > X-Key: alice
  RateLimit ~ ^"reply";r=[1-8];t=\d+0$
  X-Status: PASSED
  time < 0.4
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=0;t=600
  X-Remaining: 0
  X-Reset: 600
  time < 0.4
GET /a.txt => 429
  > X-Key: alice
  Retry-After: 60
  RateLimit-Policy: "reply";q=10;w=600
  RateLimit: "reply";r=0;t=600
  X-Status: REJECTED
  X-Remaining: 0
  X-Retry: 60
  time < 0.4
perl {
    my $span = time - $stash{t0};    # the requests' time
    my $key = main::async_key('reply', 'alice');
    ok(wait_until(2, sub { $redis->cmd('EXISTS', $key) }),
       "$name: $key appears in Redis");
    ok(wait_until(2, sub { $redis->synced({ $key => 10 }) }),
       "$name: the 10 units sent once, then the key's second sync");
    like($redis->cmd('GET', $key) // '', qr/^\d{16}$/,
         "$name: the value is an integer: the TAT in us");
    main::holds_units($redis, $key, 10, 60_000, "$name: 10 x 60 s ahead of Redis TIME");
    main::expires_with_tat($redis, $key, $name, 250);
    is(join(' ', $redis->keys_matching('*')), $key,
       "$name: the only key in Redis (the local zone writes none)");

    # one call a sync round, not one a request: a round for each 100 ms
    # interval the requests took, one more that may run late into them (a
    # round keeps its cadence however late it ran: on a busy machine two
    # can come close together), the round after them that takes the last
    # units, then the second sync
    my $rounds = int($span / 0.1) + 4;
    my $calls = $redis->script_calls - $stash{calls0};
    cmp_ok($calls, '<=', $rounds, sprintf '%s: %d EVALSHA/EVAL for 11 '
           . 'requests in %.2f s (at most %d)', $name, $calls, $span, $rounds);
    my @sync = $redis->sync_calls;
    cmp_ok(scalar(@sync), '>=', 1, "$name: synced by gcra_sync.lua");
    is(join(',', map { $_->{cmd} } @sync), join(',', ('EVALSHA') x @sync),
       "$name: ... with EVALSHA");
    is(join(',', map { "@{ $_->{keys} }" } @sync), join(',', ($key) x @sync),
       "$name: ... one key per call: $key");

    # a key touched once is synced twice, then left alone
    $stash{calls1} = $redis->script_calls;
    sleep 0.5;
    is($redis->script_calls - $stash{calls1}, 0,
       "$name: no sync while no key is touched (5 intervals)");
}
perl {
    # the same requests on another key, to the async zone and to a local
    # zone of the same policy: the same answers
    my @h = qw(ratelimit-policy ratelimit retry-after x-status x-limit
               x-remaining x-reset x-retry);
    my $show = sub {
        my ($r) = @_;
        my $t = 'status ' . ($r->{status} // 'none') . "\n";
        for my $h (@h) { $t .= "$h: $_\n" for @{ $r->{headers}{$h} || [] } }
        return $t;
    };
    my $same = 1;
    for my $i (1 .. 12) {
        my $a = request('/a.txt', 'X-Key' => 'bob');
        my $l = request('/b.txt', 'X-Key' => 'bob');
        (my $want = $show->($l)) =~ s/"loc"/"reply"/g;
        $same = is($show->($a), $want,
                   "$name: request $i on bob: async answers as local") && $same;
    }
    ok(wait_until(2, sub { main::has_units($redis, main::async_key('reply', 'bob'), 10, 60_000) }),
       "$name: bob's 10 units reach Redis");
}
--- no_error_log
cannot sync with Redis
~ \[(warn|error)\].*throttle redis



=== TEST 2: Redis key names in async mode: prefix, {zone:shard} as hash tag, odd and long keys
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT prefix=app:;
throttle_zone $http_x_key zone=odd:1m rate=1r/m burst=9 redis=main sync=async;
--- config
location / {
    throttle zone=odd;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
GET /a.txt x2 => 200
  > X-Key: a b
perl {
    my $r;
    $r = request('/a.txt', 'X-Key' => 'x' x 300) for 1 .. 3;
    is($r->{status}, 200, "$name: a 300-byte key admitted");
    my ($alice, $odd, $long) = map { RedisServer::async_key('app:', 'odd', $_) } 'alice', 'a b', 'x' x 300;
    like($odd, qr/^app:\{odd:\d+\}:~612062$/, "$name: odd bytes in hex");
    like($long, qr/^app:\{odd:\d+\}:#${\ Digest::SHA::sha256_hex('x' x 300)}$/, "$name: a long key as its digest");
    my @want = sort ($alice, $odd, $long);
    my @got;
    ok(wait_until(2, sub { @got = $redis->keys_matching('*'); @got == 3 }),
       "$name: three keys in Redis") or diag("@got");
    is("@got", "@want", "$name: <prefix>{<zone>:<shard>}:<key>, odd bytes in hex, long keys as a digest");
    ok(wait_until(2, sub { $redis->synced({ $alice => 1, $odd => 2, $long => 3 }) }),
       "$name: each key's units sent once, then its second sync");
    main::holds_units($redis, $alice, 1, 60_000, $name);
    main::holds_units($redis, $odd, 2, 60_000, $name);
    main::holds_units($redis, $long, 3, 60_000, $name);
}



=== TEST 3: Redis killed: requests decided at once by the zone, outage logged once; Redis back on the same port: pending units reach it
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async;
--- config
add_header X-Status $throttle_status always;
location / {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z cost=0;
}
--- requests
GET /a.txt => 200
  > X-Key: before
  X-Status: PASSED
perl {
    # killed once nothing is in flight: the first sync to fail cannot
    # connect (the log's reason, below)
    ok($redis->kill_when_synced({ main::async_key('z', 'before') => 1 }, 2),
       "$name: syncing while Redis is up; then Redis killed");
}
GET /a.txt => 200
  > X-Key: k1
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
  time < 0.4
GET /a.txt x2 => 200
  > X-Key: k2
  X-Status: PASSED
  time < 0.4
GET /a.txt x3 => 200
  > X-Key: k3
  X-Status: PASSED
  time < 0.4
GET /a.txt x10 => 200
  > X-Key: k4
  X-Status: PASSED
  time < 0.4
GET /a.txt => 429
  > X-Key: k4
  X-Status: REJECTED
  Retry-After: 60
  RateLimit: "z";r=0;t=600
  time < 0.4
perl {
    # requests keep coming over several sync intervals (each sync fails)
    my (%status, %x);
    my ($max, $n) = (0, 0);
    my $t0 = time;
    while (time - $t0 < 0.6) {
        my $r = request('/a.txt', 'X-Key' => 'k5');
        $n++;
        $status{ $r->{status} // 'error' }++;
        $x{ header($r, 'X-Status') // 'none' }++;
        $max = $r->{elapsed} if $r->{elapsed} > $max;
        sleep 0.02;
    }
    $stash{requests} = $n + 17;
    is($status{200}, 10, "$name: k5: 10 of $n admitted while Redis is down")
        or diag(main::fmt_counts(\%status));
    is(join(',', sort keys %status), '200,429', "$name: k5: only 200 and 429")
        or diag(main::fmt_counts(\%status));
    is(join(',', sort keys %x), 'PASSED,REJECTED', "$name: \$throttle_status PASSED or REJECTED, never an error")
        or diag(main::fmt_counts(\%x));
    cmp_ok($max, '<', 0.4, "$name: the slowest of $n answered in < 0.4 s");

    my $log = error_log();
    my $down = main::count_lines($log, qr/\[warn\].*throttle zone "z": cannot sync with Redis/);
    cmp_ok($down, '>=', 1, "$name: the outage is logged (\"cannot sync with Redis\")");
    cmp_ok($down, '<=', 2, "$name: ... once, not per request or per sync ($down lines for $stash{requests} requests)")
        or diag($log);

    $redis->restart;    # same port, empty data, empty script cache
    my $t1 = time;
    my @keys = map { main::async_key('z', "k$_") } 1 .. 5;
    ok(wait_until(5, sub { !grep { !$redis->cmd('EXISTS', $_) } @keys }),
       "$name: Redis back: the keys charged meanwhile reach it");
    note(sprintf "%s: in Redis %.2f s after it restarted", $name, time - $t1);
    my %units = (k1 => 1, k2 => 2, k3 => 3, k4 => 10, k5 => 10);
    ok(wait_until(3, sub { $redis->synced({ map { (main::async_key('z', $_) => $units{$_}) } keys %units }) }),
       "$name: each key's units sent once, then its second sync");
    # (charged while Redis was down: the TAT counts from then)
    main::holds_units($redis, main::async_key('z', $_), $units{$_}, 60_000, $name)
        for sort keys %units;
    ok(wait_until(3, sub { error_log() =~ /throttle zone "z": in sync with Redis again/ }),
       "$name: the recovery is logged (\"in sync with Redis again\")");
}
# the zone agrees with Redis
GET /b.txt => 200
  > X-Key: k2
  RateLimit: "z";r=8;t={120-}
GET /a.txt => 200
  > X-Key: k3
  RateLimit: "z";r=6;t={240-}
  X-Status: PASSED
perl {
    my @lines = grep { /cannot sync with Redis|in sync with Redis again/ }
                split /\n/, error_log();
    my $seq = join ' ', map { /cannot sync/ ? 'down' : 'up' } @lines;
    like($seq, qr/^down up/, "$name: logged when failing, then when back")
        or diag(join "\n", @lines);
}
--- error_log
~ \[warn\] .*throttle zone "z": cannot sync with Redis \(Connection refused\)
~ \[notice\] .*throttle zone "z": in sync with Redis again after \d+ failed syncs



=== TEST 4: Redis back after an outage, with syncs every 20ms under load: every unit reaches Redis once; the log's last word is that Redis is back
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=20ms;
--- config
location / {
    throttle zone=z;
}
--- requests
perl {
    # 50 keys, 10 requests at once on one of them at a time: both workers
    # busy, every key spends its 10 units while Redis is down
    $redis->kill_hard;
    my ($i, %st) = (0);
    my $t = time;
    while (time - $t < 1.5) {
        $st{ $_->{status} // 'error' }++
            for parallel_requests(10, 'GET /a.txt', 'X-Key' => 'k' . ($i++ % 50));
    }
    $redis->restart;
    $t = time;
    while (time - $t < 1) {
        $st{ $_->{status} // 'error' }++
            for parallel_requests(10, 'GET /a.txt', 'X-Key' => 'k' . ($i++ % 50));
    }
    is(join(',', sort keys %st), '200,429', "$name: only 200 and 429 (" . main::fmt_counts(\%st) . ')');
    is($st{200}, 500, "$name: 10 admitted per key, 50 keys");
    my @keys;
    ok(wait_until(3, sub { @keys = $redis->keys_matching('throttle:{z:*}:k*'); @keys == 50 }),
       "$name: the 50 keys reach Redis") or diag(scalar(@keys) . ' keys');
    ok(wait_until(3, sub { !grep { !main::has_units($redis, $_, 10, 60_000) } @keys }),
       "$name: every key's 10 units reach Redis");
    # SLOWLOG would not show the units of a call of 50 keys: a unit sent
    # twice is given the next 10 rounds to show
    sleep 0.2;
    my %units;
    for my $k (@keys) {
        $units{ main::has_units($redis, $k, 10, 60_000) ? 10
                : sprintf('%.2f', main::units_in($redis, $k) // 0) }++;
    }
    is(main::fmt_counts(\%units), '10 x50', "$name: each key holds its 10 units, once");

    my @lines = grep { /cannot sync with Redis|in sync with Redis again/ }
                split /\n/, error_log();
    my $seq = join ' ', map { /cannot sync/ ? 'down' : 'up' } @lines;
    like($seq, qr/^down up/, "$name: logged when failing, then when back")
        or diag(join "\n", @lines);
    # a worker still backing off does not claim the sync
    is($seq, 'down up', "$name: once when failing, once when back")
        or diag(join "\n", @lines);
    like($lines[-1] // '', qr/in sync with Redis again/,
         "$name: the log's last word: in sync with Redis again");
}



=== TEST 5: Redis stopped (SIGSTOP): no request waits; after SIGCONT the pending units reach Redis
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
# a request that waited for the stopped Redis would take the 500 ms of
# the timeout: the bound on requests, 0.4 s, leaves room for a busy machine
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=500ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async;
--- config
add_header X-Status $throttle_status always;
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: warm
perl {
    ok(wait_until(2, sub { $redis->cmd('EXISTS', main::async_key('z', 'warm')) }),
       "$name: syncing while Redis is up");
    $redis->pause;
}
GET /a.txt x2 => 200
  > X-Key: s1
  X-Status: PASSED
  time < 0.4
perl {
    my @res = parallel_requests(20, 'GET /a.txt', 'X-Key' => 'sp');
    my (%st, %x);
    $st{ $_->{status} // 'error' }++ for @res;
    $x{ header($_, 'X-Status') // 'none' }++ for @res;
    is(main::fmt_counts(\%st), '200 x10, 429 x10',
       "$name: 20 at once: 10 admitted, 10 rejected, by the zone");
    is(main::fmt_counts(\%x), 'PASSED x10, REJECTED x10',
       "$name: ... \$throttle_status as local");
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @res;
    cmp_ok($max, '<', 0.4, "$name: 20 at once: the slowest in < 0.4 s");

    my $worst = 0;
    my $t0 = time;
    while (time - $t0 < 1.2) {    # syncs time out meanwhile
        my $r = request('/a.txt', 'X-Key' => 'other');
        $worst = $r->{elapsed} if $r->{elapsed} > $worst;
        sleep 0.03;
    }
    cmp_ok($worst, '<', 0.4, "$name: requests over 1.2 s of stall: none waits (slowest "
           . sprintf('%.3f', $worst) . ' s)');

    my $down = main::count_lines(error_log(), qr/cannot sync with Redis/);
    cmp_ok($down, '>=', 1, "$name: the stall is logged");
    cmp_ok($down, '<=', 2, "$name: ... once ($down lines)");
    $redis->resume;
    ok(wait_until(3, sub { $redis->cmd('EXISTS', main::async_key('z', 's1'))
                           && $redis->cmd('EXISTS', main::async_key('z', 'sp')) }),
       "$name: after SIGCONT the units charged during the stall reach Redis");
    # the calls that timed out run now; then each key's second sync
    wait_until(3, sub { $redis->synced({ main::async_key('z', 's1') => 2, main::async_key('z', 'sp') => 10 }) });
    my $s1 = main::units_in($redis, main::async_key('z', 's1')) // 0;
    my $sp = main::units_in($redis, main::async_key('z', 'sp')) // 0;
    # charged since nginx started: N units less no more than that time
    my $gone = (time - $nginx->{started}) / 60;
    cmp_ok($s1, '>', 2 - $gone, "$name: s1: at least the 2 units charged");
    cmp_ok($sp, '>', 10 - $gone, "$name: sp: at least the 10 units charged");
    # a sync that timed out after reaching Redis runs on SIGCONT: its units
    # count as delivered and are not sent again
    cmp_ok($s1, '<=', 2, "$name: s1: not more than the 2 units ("
           . sprintf('%.1f', $s1) . ' units in Redis)');
    cmp_ok($sp, '<=', 10, "$name: sp: not more than the 10 units ("
           . sprintf('%.1f', $sp) . ' units in Redis)');
    # what a client sees: the zone took Redis's view. t: 3 x 60 s from s1's
    # first unit, less the time since, and more by as long as the calls
    # waited in the stopped Redis (their units count from when it ran them)
    my $r = request('/a.txt', 'X-Key' => 's1');
    my $seen = ($r->{status} // '') . ' ' . (header($r, 'RateLimit') // '');
    my ($t) = $seen =~ /^200 "z";r=7;t=(\d+)$/;
    my $since = POSIX::ceil(time - $nginx->{started});
    ok(defined $t && abs($t - 180) <= $since,
       "$name: s1 (2 units spent, 1 more now) has 7 left")
        or diag("$seen (t: 180, give or take $since)");
}
--- error_log
~ \[warn\] .*throttle zone "z": cannot sync with Redis \(no reply within 500 ms\)
in sync with Redis again



=== TEST 6: reload: the zone keeps its state and syncing goes on (with a new sync_interval)
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async;
--- config
add_header X-Gen 1 always;
location / {
    throttle zone=z;
}
--- requests
GET /a.txt x3 => 200
  > X-Key: k
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=6;t=240
perl {
    ok(wait_until(2, sub { main::has_units($redis, main::async_key('z', 'k'), 4, 60_000) }),
       "$name: k's 4 units in Redis before the reload");
}
# charged just before the reload: whichever workers sync them
GET /a.txt x2 => 200
  > X-Key: late
--- reload_http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=50ms;
--- reload_config
add_header X-Gen 2 always;
location / {
    throttle zone=z;
}
--- requests_after_reload
GET /a.txt => 200
  > X-Key: k
  X-Gen: 2
  RateLimit: "z";r=5;t={300-}
GET /a.txt => 200
  > X-Key: late
  X-Gen: 2
  RateLimit: "z";r=7;t={180-}
GET /a.txt => 200
  > X-Key: fresh
  RateLimit: "z";r=9;t=60
perl {
    ok(wait_until(2, sub { main::has_units($redis, main::async_key('z', 'k'), 5, 60_000) }),
       "$name: the new workers sync: k's 5th unit reaches Redis");
    ok(wait_until(2, sub { $redis->cmd('EXISTS', main::async_key('z', 'fresh')) }),
       "$name: a key first charged after the reload reaches Redis");
    ok(wait_until(2, sub { $redis->synced({ map { (main::async_key('z', $_->[0]) => $_->[1]) }
                                            [k => 5], [late => 3], [fresh => 1] }) }),
       "$name: each key's units sent once, then its second sync");
    main::holds_units($redis, main::async_key('z', 'k'), 5, 60_000, $name);
    main::holds_units($redis, main::async_key('z', 'late'), 3, 60_000, "$name: units charged around the reload counted once");
    main::holds_units($redis, main::async_key('z', 'fresh'), 1, 60_000, $name);
}
--- no_error_log
cannot sync with Redis
[emerg]



=== TEST 6a: reload from async to local: the keys keep their state; units Redis never got are let go, said once; nothing syncs any more
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=50ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=20ms;
--- config
add_header X-Gen 1 always;
location / {
    throttle zone=z;
}
--- requests
GET /a.txt x3 => 200
  > X-Key: k
GET /a.txt => 200
  > X-Key: j
# Redis cannot be reached: the units stay pending in the zone
perl {
    ok(wait_until(2, sub { error_log() =~ /cannot sync with Redis/ }),
       "$name: the failed syncs are logged");
}
--- reload_http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9;
--- reload_config
add_header X-Gen 2 always;
location / {
    throttle zone=z;
}
--- requests_after_reload
GET /a.txt => 200
  > X-Key: k
  X-Gen: 2
  RateLimit: "z";r=6;t={240-}
sleep 0.3
--- error_log
cannot sync with Redis
~ no longer syncs with Redis: 4 units of 2 keys not synced yet are let go
--- no_error_log
[emerg]



=== TEST 6b: nginx -s quit: the workers send the units charged since the last sync before they exit
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=60s;
--- config
location / {
    throttle zone=z;
}
--- requests
# the first sync (at start-up, with nothing to send) is over: the next is
# a minute away
sleep 1
GET /a.txt x3 => 200
  > X-Key: k
perl {
    sleep 0.3;
    ok(!$redis->cmd('EXISTS', main::async_key('z', 'k')), "$name: no sync before the quit");
    my $t = time;
    ok(ThrottleTest::Nginx::stop_nginx($nginx->{master}), "$name: nginx quits gracefully");
    cmp_ok(time - $t, '<', 2, "$name: ... within 2 s");
    main::holds_units($redis, main::async_key('z', 'k'), 3, 60_000, "$name: the 3 units reached Redis");
}
--- no_error_log
cannot sync with Redis



=== TEST 6c: reload while a sync waits in Redis: the old workers' last syncs follow it, one in flight at a time
The old workers used to send their last syncs at once, beside the one in
flight: a key's two syncs could then reach Redis out of order. Redis is
paused (CLIENT PAUSE WRITE) with a sync waiting in it, a key charged after
that sync was taken, and nginx reloaded meanwhile: a child counts the
scripts waiting in Redis until the pause ends.
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=5s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=1s;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: a
perl {
    ok(wait_until(3, sub { main::has_units($redis, main::async_key('z', 'a'), 1, 60_000) }),
       "$name: a's first sync done");
    $redis->cmd('CLIENT', 'PAUSE', 2500, 'WRITE');
}
GET /a.txt => 200
  > X-Key: b
perl {
    ok(wait_until(3, sub { $redis->scripts_waiting == 1 }),
       "$name: the sync that took b waits in the paused Redis");
    $main::waiting_file = $redis->dir . "/waiting";
    $main::sampler = Processes::fork_child(sub {
        my ($most, $until) = (0, time + 4);
        while (time < $until) {
            my $n = $redis->scripts_waiting;
            $most = $n if $n > $most;
            sleep 0.01;
        }
        open my $fh, '>', $main::waiting_file or POSIX::_exit(1);
        print $fh $most;
        close $fh;
        POSIX::_exit(0);
    });
}
# due the next sync, which the old workers would take at their last tick
GET /a.txt => 200
  > X-Key: c
--- reload_http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=5s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=50ms;
--- requests_after_reload
perl {
    ok(wait_until(6, sub { Processes::exited($main::sampler) }), "$name: the count is done");
    is(Processes::read_file($main::waiting_file), 1,
       "$name: one sync waited in Redis at a time, through the reload");
    ok(wait_until(3, sub { $redis->synced({ map { (main::async_key('z', $_) => 1) } qw(a b c) }) }),
       "$name: each key's unit sent once, then its second sync");
    main::holds_units($redis, main::async_key('z', $_), 1, 60_000, $name) for qw(a b c);
}
--- no_error_log
cannot sync with Redis
[emerg]


=== TEST 7: a key idle past its expiry is gone from Redis (its own expiry) and from the zone (the next request is fresh)
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=idle:1m rate=60r/m burst=0 redis=main sync=async;
--- config
location / {
    throttle zone=idle;
}
location = /b.txt {
    throttle zone=idle cost=0;
}
--- requests
perl: $stash{t0} = time;
GET /a.txt => 200
  > X-Key: e
  RateLimit-Policy: "idle";q=1;w=1
  RateLimit: "idle";r=0;t=1
GET /a.txt => 429
  > X-Key: e
  Retry-After: 1
perl {
    my $key = main::async_key('idle', 'e');
    ok(wait_until(1, sub { $redis->cmd('EXISTS', $key) }),
       "$name: the key reaches Redis");
    main::holds_units($redis, $key, 1, 1000, $name, $stash{t0});
    main::expires_with_tat($redis, $key, $name, 250);
    ok(wait_until(3, sub { !$redis->cmd('EXISTS', $key) }),
       "$name: the key is gone from Redis once idle past its TAT");
    my $took = time - $stash{t0};
    ok($took > 0.8 && $took < 2.5, "$name: ... "
       . sprintf('%.2f', $took) . ' s after the request');
    $stash{t1} = time;
}
# the zone's view: fresh
GET /b.txt => 200
  > X-Key: e
  RateLimit: "idle";r=1;t=0
GET /a.txt => 200
  > X-Key: e
  RateLimit: "idle";r=0;t=1
  no Retry-After
perl {
    my $key = main::async_key('idle', 'e');
    ok(wait_until(1, sub { $redis->cmd('EXISTS', $key) }),
       "$name: the new request reaches Redis");
    main::holds_units($redis, $key, 1, 1000,
                      "$name: one unit on a fresh key, nothing left from before", $stash{t1});
}



=== TEST 8: more than 500 keys due at once: one EVALSHA per 500 keys, each key's unit counted once
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=many:4m rate=1r/m burst=9 redis=main sync=async sync_interval=1s;
--- config
add_header X-Status $throttle_status always;
location / {
    throttle zone=many;
}
--- requests
perl {
    $redis->cmd('SCRIPT', 'LOAD', $main::SYNC_SCRIPT);
    my $t0 = time;
    my $r = main::distinct_keys($nginx, '/a.txt', 'key', 0, 600, 100);
    my $took = time - $t0;
    is(main::fmt_counts($r->{status}), '200 x600', "$name: 600 keys, each admitted");
    is(main::fmt_counts($r->{x_status}), 'PASSED x600', "$name: ... PASSED");
    note(sprintf '%s: 600 requests in %.2f s (slowest %.3f s)', $name, $took, $r->{max});
    my @keys;
    ok(wait_until(4, sub { @keys = $redis->keys_matching('throttle:{many:*}:*'); @keys == 600 }),
       "$name: all 600 keys reach Redis") or diag(scalar(@keys) . ' keys');
    # each key's second sync (1 s later)
    my @calls;
    ok(wait_until(3, sub {
        @calls = $redis->sync_calls;
        my $n = 0;
        $n += $_->{nkeys} for @calls;
        $n >= 1200;
    }), "$name: two syncs per key");
    my @n = map { $_->{nkeys} } @calls;
    my $sum = 0;
    $sum += $_ for @n;
    is($sum, 1200, "$name: 1200 keys sent in all (600 keys x 2 syncs)") or diag("@n");
    is(join(',', grep { $_ > 500 } @n), '', "$name: at most 500 keys per call (@n)");
    ok(scalar(grep { $_ == 500 } @n), "$name: a sync of more than 500 keys is split at 500 (@n)");
    cmp_ok(scalar(@calls), '<=', 6, "$name: " . scalar(@calls) . " calls for 600 keys");
    my %units;
    for my $k (@keys) {
        my $u = main::units_in($redis, $k) // 0;
        $units{ $u > 1 - 5 / 60 && $u <= 1 ? 'one unit' : sprintf('%.2f units', $u) }++;
    }
    is(main::fmt_counts(\%units), 'one unit x600', "$name: every key holds exactly one unit");
}



=== TEST 9: sync_interval at its bounds: 10ms syncs at once; 60s syncs at most once in 1.5 s
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=fast:1m rate=1r/m burst=9 redis=main sync=async sync_interval=10ms;
throttle_zone $http_x_key zone=slow:1m rate=1r/m burst=9 redis=main sync=async sync_interval=60s;
--- config
location = /a.txt {
    throttle zone=fast;
}
location = /b.txt {
    throttle zone=slow;
}
--- requests
perl: $stash{t0} = time;
GET /a.txt => 200
  > X-Key: k
perl {
    ok(wait_until(1, sub { $redis->cmd('EXISTS', main::async_key('fast', 'k')) }),
       "$name: sync_interval=10ms: in Redis at once");
    cmp_ok(time - $stash{t0}, '<', 0.3, "$name: ... within "
           . sprintf('%.3f', time - $stash{t0}) . ' s');

    # a new key on each zone every 0.1 s for 1.5 s
    my $t0 = time;
    my $i = 0;
    while (time - $t0 < 1.5) {
        request('/a.txt', 'X-Key' => 'f' . $i);
        request('/b.txt', 'X-Key' => 's' . $i++);
        sleep 0.1;
    }
    sleep 0.1;
    my (%calls, %keys);
    for my $c ($redis->sync_calls) {
        my ($zone) = ($c->{keys}[0] // '') =~ /^throttle:\{(\w+):\d+\}/ or next;
        $calls{$zone}++;
        $keys{$zone} += $c->{nkeys};
    }
    $calls{$_} //= 0 for qw(fast slow);
    cmp_ok($calls{fast}, '>=', 10, "$name: sync_interval=10ms: $calls{fast} syncs in 1.5 s of traffic");
    cmp_ok($calls{slow}, '<=', 1, "$name: sync_interval=60s: $calls{slow} sync in 1.5 s of traffic (at most 1)");
}



=== TEST 10: several zones in one location: a request rejected by a local or a strict zone charges the async zone nothing
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=asy:1m rate=1r/m burst=9 redis=main sync=async;
throttle_zone $http_x_key zone=loc:1m rate=1r/m burst=0;
throttle_zone $http_x_key zone=str:1m rate=1r/m burst=0 redis=main;
--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=asy;
    throttle zone=loc;
}
location = /b.txt {
    throttle zone=asy;
    throttle zone=str;
}
location = /index.html {
    throttle zone=asy;
}
--- requests
GET /a.txt => 200
  > X-Key: m1
  RateLimit: "loc";r=0;t=60
GET /a.txt x3 => 429
  > X-Key: m1
  RateLimit: "loc";r=0;t=60
GET /b.txt => 200
  > X-Key: m2
  RateLimit: "str";r=0;t=60
GET /b.txt x3 => 429
  > X-Key: m2
  RateLimit: "str";r=0;t=60
GET /index.html => 200
  > X-Key: m1
  RateLimit: "asy";r=8;t=120
GET /index.html => 200
  > X-Key: m2
  RateLimit: "asy";r=8;t=120
perl {
    ok(wait_until(2, sub { main::has_units($redis, main::async_key('asy', 'm2'), 2, 60_000) }),
       "$name: the async zone's units reach Redis");
    ok(wait_until(2, sub { $redis->synced({ main::async_key('asy', 'm1') => 2, main::async_key('asy', 'm2') => 2 }) }),
       "$name: each key's 2 units sent once, then its second sync");
    main::holds_units($redis, main::async_key('asy', 'm1'), 2, 60_000, $name);
    main::holds_units($redis, main::async_key('asy', 'm2'), 2, 60_000, $name);
}



=== TEST 11: sync=async without redis=
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m sync=async;
--- must_die
"throttle_zone" "z": "sync=" needs "redis="



=== TEST 12: sync_interval below 10ms
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=async sync_interval=5ms;
--- must_die
invalid parameter "sync_interval=5ms" in "throttle_zone": use a time from 10ms to 60s



=== TEST 13: sync_interval that is not a time
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=async sync_interval=abc;
--- must_die
invalid parameter "sync_interval=abc" in "throttle_zone"
~ nginx\.conf:\d+



=== TEST 14: sync_interval above 60s
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=async sync_interval=61s;
--- must_die
invalid parameter "sync_interval=61s" in "throttle_zone": use a time from 10ms to 60s



=== TEST 15: sync_interval with sync=strict
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=strict sync_interval=100ms;
--- must_die
"throttle_zone" "z": "sync_interval=" needs "sync=async"



=== TEST 16: sync_interval without sync= (strict by default)
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync_interval=100ms;
--- must_die
"throttle_zone" "z": "sync_interval=" needs "sync=async"



=== TEST 17: sync_interval on a local zone
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m sync_interval=100ms;
--- must_die
"throttle_zone" "z": "sync_interval=" needs "sync=async"



=== TEST 18: sync=bogus
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=bogus;
--- must_die
invalid parameter "sync=bogus" in "throttle_zone": use sync=strict or sync=async



=== TEST 19: sync= is case-sensitive
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=ASYNC;
--- must_die
invalid parameter "sync=ASYNC" in "throttle_zone"



=== TEST 20: an empty sync_interval=
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=async sync_interval=;
--- must_die
invalid parameter "sync_interval=" in "throttle_zone"
