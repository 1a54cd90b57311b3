# SPDX-License-Identifier: BSD-2-Clause
# Async mode for the window counters (algorithm=fixed_window or
# sliding_window with redis=NAME sync=async): the zone decides every
# request at once and every sync_interval one worker sends the units it
# admitted to Redis (fixed_window_sync.lua / sliding_window_sync.lua),
# whose counts replace the zone's view. With real redis-server processes:
#
# - two nginx (2 workers each) sharing a Redis: each learns what the other
#   admitted within a few intervals, admits only what is left, and Redis's
#   hash counts every admitted unit once (fixed: n; sliding: c);
# - Redis killed, then started again on the same port: requests are
#   decided at once meanwhile, and the units admitted then reach Redis,
#   exactly, once it is back;
# - a key idle past its window(s) is gone from Redis by its own expiry.
#
# The counting tests use minute windows (10r/m): a window turning mid-test
# would reset fixed_window's counts (and make sliding_window's weigh the
# previous window), so they start with minute_guard(), which sleeps until
# just after the minute turns if the test might otherwise straddle a turn.
# The expiry test uses second windows, so that it is quick.
#
# The two-node part is plain Test::More (the block runner starts one nginx
# per block); the rest are blocks.

use strict;
use warnings;

use FindBin;
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep time);

use Clock qw(minute_guard);
use RedisChecks qw(async_key all_expire);
use RedisServer;
use Responses qw(hdr status_of fmt_counts);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name; async_key, all_expire,
# minute_guard, hdr, status_of and fmt_counts come from t/lib:
# RedisChecks.pm, Clock.pm, Responses.pm)

our %SHORT = (fixed_window => 'fw', sliding_window => 'sw');
our %FIELD = (fixed_window => 'n', sliding_window => 'c');

# r= of a RateLimit field, or the field itself when it has none.
sub r_of {
    my ($res) = @_;
    my $v = hdr($res, 'RateLimit') // '(none)';
    return $v =~ /;r=(\d+);/ ? $1 : $v;
}

# The window hash of an async key: { w, n } or { w, p, c }; {} if absent.
sub window_hash {
    my ($redis, $key) = @_;
    return { @{ $redis->cmd('HGETALL', $key) } };
}

# What Redis holds for window keys at one instant: [its TIME in us,
# { key => [hash, PTTL] }].
sub window_snapshot {
    my ($redis, @keys) = @_;
    my ($time, @replies) = $redis->atomically(
        ['TIME'], map { (['HGETALL', $_], ['PTTL', $_]) } @keys);
    my %held = map { $_ => [{ @{ shift @replies } }, shift @replies] } @keys;
    return [$time->[0] * 1e6 + $time->[1], \%held];
}

# Checks an async window key in Redis: $units counted in the current
# window (n or c), w its start, p = 0, and a TTL that ends with the window
# (fixed) or the next one (sliding). As of $snap (window_snapshot), or now.
sub holds_window {
    my ($redis, $alg, $key, $units, $W, $label, $snap) = @_;
    $snap //= window_snapshot($redis, $key);
    my $now = $snap->[0];
    my $start = $now - $now % $W;
    my ($h, $pttl) = @{ $snap->[1]{$key} };
    my $f = $FIELD{$alg};
    is($h->{$f}, $units, "$label: $key: $f = $units")
        or diag(join ' ', %$h);
    is($h->{w}, $start, "$label: $key: w = the window's start (a multiple of $W us)");
    if ($alg eq 'sliding_window') {
        is($h->{p}, 0, "$label: $key: p = 0 (nothing the window before)");
    }
    # (a TTL may exceed the exact end: RedisServer::ttl_slack_ms)
    my $end = $alg eq 'fixed_window' ? $start + $W : $start + 2 * $W;
    ok($pttl > 0 && $pttl <= ($end - $now) / 1000 + RedisServer::ttl_slack_ms($W),
       "$label: $key: expires with " . ($alg eq 'fixed_window' ? 'its window' : 'the next window')
       . " ($pttl ms)");
}

# ---------------------------------------------------------------------------
# Two nginx instances, one Redis, one async zone per algorithm

sub two_nodes {
    my $redis = RedisServer->start(conf => ['slowlog-log-slower-than 0',
                                            'slowlog-max-len 10000']);
    my $port = $redis->port;

    # timeout=1s, as the blocks' default: the tests want no Redis error
    # logged, and on busy CPUs a reply can take more than 100 ms
    my %conf = (
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_key zone=fw:1m rate=10r/m burst=0 algorithm=fixed_window redis=main sync=async sync_interval=100ms;
throttle_zone \$http_x_key zone=sw:1m rate=10r/m burst=0 algorithm=sliding_window redis=main sync=async sync_interval=100ms;
HTTP
        config => <<"SERVER",
add_header X-Status \$throttle_status always;
location /fw/ { alias \$TEST_NGINX_HTML_DIR/; throttle zone=fw; }
location /sw/ { alias \$TEST_NGINX_HTML_DIR/; throttle zone=sw; }
# cost 0: what the node thinks of the key, without charging it
location /fw0/ { alias \$TEST_NGINX_HTML_DIR/; throttle zone=fw cost=0; }
location /sw0/ { alias \$TEST_NGINX_HTML_DIR/; throttle zone=sw cost=0; }
SERVER
    );

    my @logs = with_instances('two nodes', 2, \%conf, sub {
        # both parts here and the next block's count in minute windows
        minute_guard(20);
        two_nodes_tests($redis, @_);
    });
    for my $i (0 .. $#logs) {
        my $log = $logs[$i];
        my $n = $i ? 'B' : 'A';
        unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
               "two nodes: node $n: no crash, alert or crit in error.log");
        unlike($log, qr/\[(warn|error)\].*(cannot sync with Redis|throttle redis|Redis answered)/,
               "two nodes: node $n: no Redis error logged");
    }
    $redis->stop;
}

sub two_nodes_tests {
    my ($redis, $A, $B) = @_;
    my $W = 60e6;
    my $wait = \&ThrottleTest::Step::wait_until;

    isnt($A->{port}, $B->{port}, 'two nodes: two nginx on their own ports');
    # whose sync call is whose: each node's connections to Redis, as now
    my $nodes = sub { [worker_ports($A, $B)] };

    for my $alg (qw(fixed_window sliding_window)) {
        my $ab = $SHORT{$alg};
        my $f = $FIELD{$alg};
        my $rkey = main::async_key($ab, 'k');
        my $name = "two nodes, $alg";
        my $peek = sub { r_of(http_request($_[0], "GET /${ab}0/a.txt", 'X-Key' => 'k')) };
        my $get = sub { http_request($_[0], "GET /$ab/a.txt", 'X-Key' => 'k') };

        # -- A admits 6; B learns them within a few intervals -------------
        my @r = map { $get->($A) } 1 .. 6;
        is(join(' ', map { status_of($_) . ' r=' . r_of($_) } @r),
           join(' ', map { "200 r=$_" } reverse 4 .. 9),
           "$name: A admits 6 on a fresh key, decided by its zone");
        is($peek->($B), 10, "$name: B has not seen the key: fresh (decided locally, at once)");

        my $t0 = time;
        my $last;
        ok($wait->(2, sub { ($last = $peek->($B)) eq '4' }),
           "$name: B learns A's 6 units (r=4)") or diag("B's view: r=$last");
        cmp_ok(time - $t0, '<', 1, "$name: ... within a few sync intervals ("
               . sprintf('%.2f', time - $t0) . ' s)');

        # -- B admits only the 4 left ---------------------------------------
        my ($admitted, @seen) = (0);
        for (1 .. 10) {
            my $res = $get->($B);
            push @seen, status_of($res) . ' ' . (hdr($res, 'RateLimit') // '');
            last unless ($res->{status} // 0) == 200;
            $admitted++;
        }
        is($admitted, 4, "$name: B admits the 4 units left, no more") or diag(join "\n", @seen);
        like($seen[-1], qr/^429 "$ab";r=0;t=\d+$/, "$name: ... then rejects");

        # -- Redis counts each unit once; both views converge ---------------
        ok($wait->(2, sub { (window_hash($redis, $rkey)->{$f} // 0) == 10 }),
           "$name: Redis counts the 10 units");
        ok($wait->(2, sub { $redis->synced({ $rkey => 10 }, nodes => $nodes) }),
           "$name: each node sent its units, then synced once more");
        holds_window($redis, $alg, $rkey, 10, $W, $name);

        $t0 = time;
        ok($wait->(2, sub { ($last = $peek->($A)) eq '0' }),
           "$name: A's view becomes the global one (r=0)") or diag("A's view: r=$last");
        cmp_ok(time - $t0, '<', 1, "$name: ... within a few sync intervals ("
               . sprintf('%.2f', time - $t0) . ' s)');
        is($peek->($B), 0, "$name: B's view: r=0");
        is(status_of($get->($A)), 429, "$name: A rejects the key now");
        is(status_of($get->($B)), 429, "$name: B rejects it too");
        sleep 0.3;    # 3 sync rounds: a rejection counted would show
        is(window_hash($redis, $rkey)->{$f}, 10, "$name: rejections count nothing in Redis");
    }

    # -- both nodes at once on a fresh key: each admits at most its limit
    #    before it hears of the other (the documented bound); Redis then
    #    counts exactly what they admitted, and both views converge -------
    for my $alg (qw(fixed_window sliding_window)) {
        my $ab = $SHORT{$alg};
        my $f = $FIELD{$alg};
        my $rkey = main::async_key($ab, 'p');
        my $name = "two nodes at once, $alg";
        my @socks;
        for my $i (0 .. 39) {
            my $node = $i % 2 ? $B : $A;
            push @socks, [$i % 2, ThrottleTest::connect_to($node)];
        }
        my $msg = "GET /$ab/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Key: p\r\n"
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
           "$name: neither node admits more than 10 (A $admitted[0], B $admitted[1])");
        cmp_ok($total, '>=', 10, "$name: at least 10 in total ($total)");
        ok($wait->(2, sub { (window_hash($redis, $rkey)->{$f} // 0) >= $total }),
           "$name: what both admitted reaches Redis");
        ok($wait->(2, sub { $redis->synced({ $rkey => $total }, nodes => $nodes) }),
           "$name: each node sent its units, then synced once more");
        holds_window($redis, $alg, $rkey, $total, $W, "$name: no unit lost or counted twice");
        for my $pair (['A', $A], ['B', $B]) {
            my ($n, $node) = @$pair;
            my $last;
            ok($wait->(2, sub {
                ($last = r_of(http_request($node, "GET /${ab}0/a.txt", 'X-Key' => 'p'))) eq '0'
            }), "$name: node ${n}'s view is the global state (r=0)") or diag("node $n: r=$last");
        }
    }
    all_expire($redis, 'two nodes');
}

two_nodes();

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: Redis killed: requests decided at once by the zone; Redis back on the same port: the units admitted meanwhile reach it, exactly
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=fw:1m rate=10r/m burst=0 algorithm=fixed_window redis=main sync=async;
throttle_zone $http_x_key zone=sw:1m rate=10r/m burst=0 algorithm=sliding_window redis=main sync=async;
--- config
add_header X-Status $throttle_status always;
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw; }
location /fw0/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw cost=0; }
location /sw0/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw cost=0; }
--- requests
perl {
    # counts in minute windows: see the top of the file
    main::minute_guard(10);
    for my $ab (qw(fw sw)) {
        request("/$ab/a.txt", 'X-Key' => 'before');
    }
    # killed once nothing is in flight: the first sync to fail cannot
    # connect (the log's reason, below)
    ok($redis->kill_when_synced({ map { (main::async_key($_, 'before') => 1) } qw(fw sw) }, 2),
       "$name: syncing while Redis is up; then Redis killed");

    my %units = (k1 => 1, k3 => 3, k10 => 10);
    for my $ab (qw(fw sw)) {
        my ($max, %st) = (0);
        for my $k (sort keys %units) {
            for (1 .. ($units{$k} == 10 ? 12 : $units{$k})) {
                my $r = request("/$ab/a.txt", 'X-Key' => $k);
                $st{ "$k " . ($r->{status} // 'error') . ' ' . (header($r, 'X-Status') // '') }++;
                $max = $r->{elapsed} if $r->{elapsed} > $max;
            }
        }
        is(main::fmt_counts(\%st),
           'k1 200 PASSED x1, k10 200 PASSED x10, k10 429 REJECTED x2, k3 200 PASSED x3',
           "$name: $ab: decided by the zone while Redis is down");
        cmp_ok($max, '<', 0.1, "$name: $ab: the slowest answered in < 0.1 s ("
               . sprintf('%.3f', $max) . ' s)');
    }
    # the first failed sync is logged; then several more fail (5 rounds)
    wait_until(2, sub { my $log = error_log();
                        !grep { $log !~ /throttle zone "$_": cannot sync/ } qw(fw sw) });
    sleep 0.5;
    my $log = error_log();
    for my $ab (qw(fw sw)) {
        my $down = () = $log =~ /\[warn\].*throttle zone "$ab": cannot sync with Redis/g;
        cmp_ok($down, '>=', 1, "$name: $ab: the outage is logged");
        cmp_ok($down, '<=', 2, "$name: $ab: ... once ($down lines)");
    }

    $redis->restart;    # same port, empty data, empty script cache
    my @keys = map { my $ab = $_; map { main::async_key($ab, $_) } sort keys %units } qw(fw sw);
    ok(wait_until(5, sub { !grep { !$redis->cmd('EXISTS', $_) } @keys }),
       "$name: Redis back: the keys charged meanwhile reach it");
    ok(wait_until(2, sub { $redis->synced({ map { my $ab = $_;
                                                  map { (main::async_key($ab, $_) => $units{$_}) } keys %units }
                                            qw(fw sw) }) }),
       "$name: each key's units sent once, then its second sync");
    for my $alg (qw(fixed_window sliding_window)) {
        my $ab = $main::SHORT{$alg};
        main::holds_window($redis, $alg, main::async_key($ab, $_), $units{$_}, 60e6, "$name: $alg")
            for sort keys %units;
        # the zone's view agrees
        my %r = map { $_ => main::r_of(request("/${ab}0/a.txt", 'X-Key' => $_)) } sort keys %units;
        is(join(' ', map { "$_:$r{$_}" } sort keys %r), 'k1:9 k10:0 k3:7',
           "$name: $alg: the zone's view agrees");
    }
    ok(wait_until(2, sub { error_log() =~ /throttle zone "fw": in sync with Redis again/
                           && error_log() =~ /throttle zone "sw": in sync with Redis again/ }),
       "$name: the recovery is logged");
    main::all_expire($redis, $name);
}
--- error_log
~ \[warn\] .*throttle zone "fw": cannot sync with Redis \(Connection refused\)
~ \[notice\] .*throttle zone "sw": in sync with Redis again after \d+ failed syncs



=== TEST 2: a key idle past its window(s) is gone from Redis by its own expiry, and fresh in the zone (second windows)
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=fw:1m rate=2r/s burst=0 algorithm=fixed_window redis=main sync=async;
throttle_zone $http_x_key zone=sw:1m rate=2r/s burst=0 algorithm=sliding_window redis=main sync=async;
--- config
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw; }
location /fw0/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw cost=0; }
location /sw0/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw cost=0; }
--- requests
perl {
    # early in a second, so that the key is synced in the window it was
    # charged in
    sleep(1.05 - (time() - int(time())));
    $stash{t0} = time;
    for my $ab (qw(fw sw)) {
        my $r = request("/$ab/a.txt", 'X-Key' => 'e');
        is(($r->{status} // 'none') . ' ' . main::r_of($r), '200 1', "$name: $ab: admitted, r=1");
    }
    ok(wait_until(1, sub { $redis->cmd('EXISTS', main::async_key('fw', 'e'))
                           && $redis->cmd('EXISTS', main::async_key('sw', 'e')) }),
       "$name: the keys reach Redis");
    main::holds_window($redis, 'fixed_window', main::async_key('fw', 'e'), 1, 1e6, $name);
    main::holds_window($redis, 'sliding_window', main::async_key('sw', 'e'), 1, 1e6, $name);
    # gone at the end of the window (about 0.95 s after the request), of
    # the next one for sliding_window (1.95 s): not before, and not a
    # window later (the exact time is the PTTL checked above; a poll here
    # may run late on a busy machine)
    ok(wait_until(2, sub { !$redis->cmd('EXISTS', main::async_key('fw', 'e')) }),
       "$name: fixed_window: gone from Redis once its window is over");
    my $took = time - $stash{t0};
    ok($took > 0.8 && $took < 1.9, "$name: fixed_window: ... " . sprintf('%.2f', $took) . ' s after the request');
    ok(wait_until(2, sub { !$redis->cmd('EXISTS', main::async_key('sw', 'e')) }),
       "$name: sliding_window: gone from Redis once the next window is over too");
    $took = time - $stash{t0};
    ok($took > 1.5 && $took < 2.9, "$name: sliding_window: ... " . sprintf('%.2f', $took)
       . ' s after the request');
}
# the zone's view: fresh; a look (cost 0) writes nothing to Redis
perl: $stash{mark} = $redis->slowlog_mark;
GET /fw0/a.txt => 200
  > X-Key: e
  RateLimit: "fw";r=2;t=0
GET /sw0/a.txt => 200
  > X-Key: e
  RateLimit: "sw";r=2;t=0
perl {
    ok(wait_until(2, sub { $redis->synced({ main::async_key('fw', 'e') => 0, main::async_key('sw', 'e') => 0 },
                                          since => $stash{mark}) }),
       "$name: the looks are synced, with no units");
    is(join(' ', $redis->keys_matching('*')), '', "$name: a look brings no key back");
    sleep(1.05 - (time() - int(time())));
}
GET /fw/a.txt => 200
  > X-Key: e
  RateLimit ~ ^"fw";r=1;t=1$
GET /sw/a.txt => 200
  > X-Key: e
  RateLimit ~ ^"sw";r=1;t=2$
perl {
    ok(wait_until(1, sub { $redis->cmd('EXISTS', main::async_key('fw', 'e'))
                           && $redis->cmd('EXISTS', main::async_key('sw', 'e')) }),
       "$name: the new requests reach Redis");
    main::holds_window($redis, 'fixed_window', main::async_key('fw', 'e'), 1, 1e6,
                       "$name: one unit on a fresh key");
    main::holds_window($redis, 'sliding_window', main::async_key('sw', 'e'), 1, 1e6,
                       "$name: one unit on a fresh key");
}



=== TEST 3: units charged late in a window are counted in that window: the sync says how long ago the node's window began (second windows)
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=fw:1m rate=5r/s burst=0 algorithm=fixed_window redis=main sync=async sync_interval=50ms;
throttle_zone $http_x_key zone=sw:1m rate=5r/s burst=0 algorithm=sliding_window redis=main sync=async sync_interval=50ms;
--- config
location /fw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=fw; }
location /sw/ { alias $TEST_NGINX_HTML_DIR/; throttle zone=sw; }
--- requests
perl {
    # 0.6 s into a second, synced within about 0.1 s: Redis must place
    # the units 0.6 s back, in the window they were charged in (placed
    # "now", a window past its half would be taken for the next one). A
    # try counts when its keys were in Redis, and what Redis held was read,
    # before that window ended; a busy machine can miss that: then another
    # try, with keys of its own.
    my ($kept, @late) = (0);
    for my $try (1 .. 6) {
        sleep(1.6 - (time() - int(time())));
        my $second = int(time());
        my @keys = map { main::async_key($_, "late$try") } qw(fw sw);
        for my $ab (qw(fw sw)) {
            is(request("/$ab/a.txt", 'X-Key' => "late$try")->{status}, 200,
               "$name: try $try: $ab: admitted 0.6 s into a window");
        }
        my $in = wait_until(0.3, sub { !grep { !$redis->cmd('EXISTS', $_) } @keys });
        my $snap = main::window_snapshot($redis, @keys);
        if (!$in || int($snap->[0] / 1e6) != $second) {
            push @late, "try $try: " . ($in ? 'read' : 'in Redis') . ' after the window';
            next;
        }
        main::holds_window($redis, 'fixed_window', $keys[0], 1, 1e6, "$name: try $try", $snap);
        main::holds_window($redis, 'sliding_window', $keys[1], 1, 1e6, "$name: try $try", $snap);
        last if ++$kept == 2;
    }
    diag("timing missed: @late") if @late;
    is($kept, 2, "$name: two tries in Redis before their window ended");
}



=== TEST 4: 600 keys due at once (sliding_window): one EVALSHA per 500 keys at most, each key's unit counted once
--- redis
redis: slowlog-log-slower-than 0; slowlog-max-len 10000
--- http_config
@redis_main
throttle_zone $http_x_key zone=many:4m rate=10r/h burst=0 algorithm=sliding_window redis=main sync=async sync_interval=1s;
--- config
add_header X-Status $throttle_status always;
location / {
    throttle zone=many;
}
--- requests
perl {
    # hour windows: a turn of the hour (slept past if due) would move the
    # units to p
    my $left = 3600 - (time() - 3600 * int(time() / 3600));
    sleep($left + 0.5) if $left < 10;
    my $sha = RedisServer::script_sha('sliding_window_sync');
    is($redis->cmd('SCRIPT', 'LOAD', RedisServer::script_source('sliding_window_sync')), $sha,
       "$name: sliding_window_sync.lua's SHA1");
    my (%st, %x);
    for my $batch (0 .. 5) {
        for my $r (map { parallel_requests(1, 'GET /a.txt', 'X-Key' => "key$_") }
                   $batch * 100 .. $batch * 100 + 99) {
            $st{ $r->{status} // 'error' }++;
            $x{ header($r, 'X-Status') // 'none' }++;
        }
    }
    is(main::fmt_counts(\%st), '200 x600', "$name: 600 keys, each admitted");
    my @keys;
    ok(wait_until(4, sub { @keys = $redis->keys_matching('throttle:{many:*}:*'); @keys == 600 }),
       "$name: all 600 keys reach Redis") or diag(scalar(@keys) . ' keys');
    # each key's second sync (a round, 1 s, later)
    my (@calls, $sum);
    ok(wait_until(3, sub {
        @calls = map { $_->{nkeys} } $redis->sync_calls;
        $sum = 0;
        $sum += $_ for @calls;
        $sum >= 1200;
    }), "$name: two syncs per key");
    is($sum, 1200, "$name: 1200 keys sent in all (600 keys x 2 syncs)") or diag("@calls");
    is(join(',', grep { $_ > 500 } @calls), '', "$name: at most 500 keys per call (@calls)");
    ok(scalar(grep { $_ == 500 } @calls), "$name: a sync of more than 500 keys is split at 500");
    my %held;
    for my $k (@keys) {
        my $h = main::window_hash($redis, $k);
        $held{ "p=" . ($h->{p} // '-') . " c=" . ($h->{c} // '-') }++;
    }
    is(main::fmt_counts(\%held), 'p=0 c=1 x600', "$name: every key holds exactly one unit");
    main::all_expire($redis, $name);
}



=== TEST 5: sliding_log cannot sync=async
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=10r/m algorithm=sliding_log redis=main sync=async;
--- must_die
"throttle_zone" "z": "algorithm=sliding_log" cannot "sync=async"
