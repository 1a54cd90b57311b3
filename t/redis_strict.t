# SPDX-License-Identifier: BSD-2-Clause
# Strict mode (throttle_zone ... redis=NAME): every decision is made by the
# GCRA script in a real redis-server, with the same headers and variables
# as a local zone; the key lives in Redis with a TTL; the zone caches
# denials; several zones refund; prefix, database, script cache, restart,
# reload.
#
# Rates are slow (1r/m) so that the milliseconds a block takes never change
# an expected value.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block with
one Redis; and the server{} of a block with none of its own: zone z on
every location, its $throttle_status as X-Status.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
}


=== TEST 1: Redis decides: burst+1 pass, then 429, exact headers and variables
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=reply:1m rate=1r/m burst=2 redis=main;
--- config
location / {
    throttle zone=reply;
    add_header X-Status $throttle_status always;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
    add_header X-Reset $throttle_reset always;
    add_header X-Retry $throttle_retry_after always;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "reply";q=3;w=180
  RateLimit: "reply";r=2;t=60
  no Retry-After
  X-Status: PASSED
  X-Limit: 3
  X-Remaining: 2
  X-Reset: 60
  X-Retry: 0
  body: a
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=1;t=120
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=0;t=180
  X-Remaining: 0
perl: $stash{calls} = $redis->scripts_run;
GET /a.txt => 429
  > X-Key: alice
  Retry-After: 60
  RateLimit-Policy: "reply";q=3;w=180
  RateLimit: "reply";r=0;t=180
  X-Status: REJECTED
  X-Retry: 60
perl {
    my $key = 'throttle:reply:{alice}';
    my $tat = $redis->cmd('GET', $key);
    like($tat // '', qr/^\d+$/, "$name: $key holds an integer string");
    my $now = $redis->time_us;
    my $ahead = ($tat // 0) - $now;
    ok($ahead > 170e6 && $ahead <= 180e6,
       "$name: ... the TAT, 3 x 60 s ahead of Redis TIME")
        or diag("TAT $tat, TIME $now");
    my $pttl = $redis->cmd('PTTL', $key);
    ok($pttl > 0 && $pttl <= 180_000, "$name: the key has a TTL ($pttl ms)");
    cmp_ok($stash{calls}, '>=', 3, "$name: decided by EVALSHA");
    is($redis->scripts_run, $stash{calls},
       "$name: ... but the 429, from the TAT Redis's last answer gave");
    is(join(' ', $redis->keys_matching('*')), $key, "$name: one key written");
}
--- error_log
~ \[error\] .*throttled by zone "reply", retry after



=== TEST 2: the state is Redis's: what another client wrote decides
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=2 redis=main;
--- requests
perl {
    my $now = $redis->time_us;
    # bob: full (TAT 180 s ahead); carol: one unit left (120 s ahead)
    $redis->cmd('SET', 'throttle:z:{bob}', $now + 180e6, 'PX', 180_000);
    $redis->cmd('SET', 'throttle:z:{carol}', $now + 120e6, 'PX', 120_000);
}
GET /a.txt => 429
  > X-Key: bob
  Retry-After: {60-}
  RateLimit: "z";r=0;t={180-}
GET /a.txt => 200
  > X-Key: carol
  RateLimit: "z";r=0;t={180-}
GET /a.txt => 429
  > X-Key: carol
GET /a.txt => 200
  > X-Key: dave
  RateLimit: "z";r=2;t=60



=== TEST 3: both workers decide through Redis, exactly: 20 at once, 10 pass
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- config
location / {
    throttle zone=z;
    add_header X-Pid $pid always;
}
--- requests
parallel 20 /a.txt => 200 x10, 429 x10
  > X-Key: k
parallel 20 /a.txt => 200 x10, 429 x10
  > X-Key: k2
parallel 20 /a.txt => 200 x10, 429 x10
  > X-Key: k3
parallel 20 /a.txt => 200 x10, 429 x10
  > X-Key: k4
parallel 20 /a.txt => 200 x10, 429 x10
  > X-Key: k5
--- distinct
X-Pid >= 2



=== TEST 4: the denial cache: a rejected key is rejected locally until Retry-After, with no round trip
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: flood
GET /a.txt => 429
  > X-Key: flood
  Retry-After: 60
perl: $stash{calls} = $redis->script_calls;
GET /a.txt x50 => 429
  > X-Key: flood
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit-Policy: "z";q=1;w=60
  RateLimit: "z";r=0;t={60-}
perl {
    my $delta = $redis->script_calls - $stash{calls};
    cmp_ok($delta, '<=', 2,
           "$name: 50 rejections of a cached key cost $delta EVALSHA (<= 2)");
    # even with the key gone from Redis, the cached denial holds
    $redis->cmd('DEL', 'throttle:z:{flood}');
    $stash{calls} = $redis->script_calls;
}
GET /a.txt => 429
  > X-Key: flood
  Retry-After: {60-}
perl {
    is($redis->script_calls - $stash{calls}, 0,
       "$name: a cached denial holds without asking Redis");
}
# other keys still go to Redis
GET /a.txt => 200
  > X-Key: other
  X-Status: PASSED
perl {
    is($redis->script_calls - $stash{calls}, 1,
       "$name: another key is decided by Redis");
}



=== TEST 5: the denial cache ends when Retry-After has passed
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/s burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
GET /a.txt => 429
  > X-Key: k
  Retry-After: 1
perl: $stash{calls} = $redis->script_calls;
GET /a.txt x20 => 429
  > X-Key: k
perl {
    cmp_ok($redis->script_calls - $stash{calls}, '<=', 2,
           "$name: cached while Retry-After lasts");
}
sleep 1.1
perl: $stash{calls} = $redis->script_calls;
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=0;t=1
perl {
    is($redis->script_calls - $stash{calls}, 1,
       "$name: after Retry-After, Redis decides again");
}



=== TEST 6: cost, fixed and from a variable; cost 0; a cost that can never fit
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=4 redis=main;
--- config
location = /a.txt {
    throttle zone=z cost=3;
}
location = /b.txt {
    throttle zone=z cost=$http_x_cost;
}
--- requests
GET /a.txt => 200
  > X-Key: c
  RateLimit-Policy: "z";q=5;w=300
  RateLimit: "z";r=2;t=180
GET /a.txt => 429
  > X-Key: c
  Retry-After: 60
  RateLimit: "z";r=2;t=180
GET /b.txt => 200
  > X-Key: c
  > X-Cost: 0
  RateLimit: "z";r=2;t={180-}
GET /b.txt => 200
  > X-Key: c
  > X-Cost: 2
  RateLimit: "z";r=0;t={300-}
GET /b.txt => 429
  > X-Key: fresh
  > X-Cost: 6
  no Retry-After
  RateLimit: "z";r=5;t=0
perl {
    is($redis->cmd('EXISTS', 'throttle:z:{fresh}'), 0,
       "$name: a cost that never fits writes nothing");
}



=== TEST 7: an empty key is not limited and costs no round trip
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt x5 => 200
  X-Status: PASSED
  no RateLimit
perl {
    is($redis->scripts_run, 0, "$name: no EVALSHA for empty keys");
    is(join(' ', $redis->keys_matching('*')), '', "$name: no key written");
}



=== TEST 8: several strict zones: a request rejected by one is charged to none
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=a:1m rate=1r/m burst=1 redis=main;
throttle_zone k zone=b:1m rate=1r/m burst=9 redis=main;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
GET /a.txt => 200
  RateLimit: "a";r=1;t=60
GET /a.txt => 200
  RateLimit: "a";r=0;t=120
GET /a.txt x4 => 429
  Retry-After: {60-}
  RateLimit-Policy: "a";q=2;w=120
  RateLimit: "a";r=0;t={120-}
# b was charged for the two admitted requests only: 10 - 2 - this one = 7
GET /b.txt => 200
  RateLimit-Policy: "b";q=10;w=600
  RateLimit: "b";r=7;t={180-}
perl {
    my $tat = $redis->cmd('GET', 'throttle:b:{k}');
    my $ahead = $tat - $redis->time_us;
    ok($ahead > 170e6 && $ahead <= 180e6,
       "$name: b's TAT in Redis is 3 units ahead, not 7")
        or diag("ahead by $ahead us");
}
--- error_log
throttled by zone "a", retry after
--- no_error_log
throttled by zone "b"



=== TEST 9: several zones, the rejecting one strict, the other local: the local one is not charged
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=strict:1m rate=1r/m burst=1 redis=main;
throttle_zone k zone=local:1m rate=1r/m burst=9;
--- config
location = /a.txt {
    throttle zone=local;
    throttle zone=strict;
}
location = /b.txt {
    throttle zone=local;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt x3 => 429
  RateLimit-Policy: "strict";q=2;w=120
GET /b.txt => 200
  RateLimit: "local";r=7;t={180-}



=== TEST 10: several zones, the rejecting one local, the other strict: Redis is refunded
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=local:1m rate=1r/m burst=1;
throttle_zone k zone=strict:1m rate=1r/m burst=9 redis=main;
--- config
location = /a.txt {
    throttle zone=strict;
    throttle zone=local;
}
location = /b.txt {
    throttle zone=strict;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt x3 => 429
  RateLimit-Policy: "local";q=2;w=120
GET /b.txt => 200
  RateLimit: "strict";r=7;t={180-}



=== TEST 11: two strict zones, each rejecting in turn: neither keeps a charge
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_a zone=a:1m rate=1r/m burst=1 redis=main;
throttle_zone $http_x_b zone=b:1m rate=1r/m burst=1 redis=main;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b;
}
--- requests
# fill a's key "x" and b's key "y" with requests that have one key only
GET /a.txt x2 => 200
  > X-A: x
GET /a.txt x2 => 200
  > X-B: y
# x is full in a: b's key "fresh" must not be charged
GET /a.txt x3 => 429
  > X-A: x
  > X-B: fresh
# y is full in b: a's key "fresh" must not be charged
GET /a.txt x3 => 429
  > X-A: fresh
  > X-B: y
GET /a.txt => 200
  > X-A: fresh
  > X-B: fresh2
  RateLimit ~ ^"[ab]";r=1;t=60$
GET /a.txt => 200
  > X-A: fresh3
  > X-B: fresh
  RateLimit ~ ^"[ab]";r=1;t=60$



=== TEST 12: prefix= and database=
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT prefix=myapp: database=3;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "z";r=1;t=60
perl {
    is(join(' ', $redis->keys_matching('*', 3)), 'myapp:z:{alice}',
       "$name: key myapp:z:{alice} in db 3");
    is(join(' ', $redis->keys_matching('*', 0)), '', "$name: nothing in db 0");
}



=== TEST 13: odd keys are limited by Redis, each on its own, and the names carry a TTL
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: a}b{c
GET /a.txt => 429
  > X-Key: a}b{c
GET /a.txt => 200
  > X-Key: a b
GET /a.txt => 429
  > X-Key: a b
GET /a.txt => 200
  > X-Key: ab
perl {
    my @keys = $redis->keys_matching('throttle:z:*');
    is(scalar @keys, 3, "$name: three keys in Redis") or diag("@keys");
    for my $k (@keys) {
        cmp_ok($redis->cmd('PTTL', $k), '>', 0, "$name: $k has a TTL");
    }
    like($redis->cmd('GET', 'throttle:z:{ab}') // '', qr/^\d+$/,
         "$name: a printable key is throttle:z:{ab}");
}
# keys that look like encoded forms of others are keys of their own
GET /a.txt => 200
  > X-Key: ~612062
GET /a.txt => 200
  > X-Key: ~617d627b63



=== TEST 14: dry run with Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location / {
    throttle zone=z;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  X-Status: PASSED
GET /a.txt x2 => 200
  X-Status: REJECTED_DRY_RUN
  no Retry-After
  RateLimit: "z";r=0;t=60
--- error_log
(dry run)



=== TEST 15: SCRIPT FLUSH: the next requests are decided as before (NOSCRIPT recovered)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=3 redis=main;
--- requests
GET /a.txt => 200
  RateLimit: "z";r=3;t=60
perl {
    is($redis->cmd('SCRIPT', 'FLUSH'), 'OK', "$name: SCRIPT FLUSH");
    $stash{eval} = $redis->calls('eval');
}
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "z";r=2;t=120
perl {
    is($redis->calls('eval') - $stash{eval}, 1,
       "$name: NOSCRIPT answered by one EVAL");
    is($redis->cmd('SCRIPT', 'EXISTS', '0' x 40)->[0], 0, "$name: (sanity)");
    $stash{eval} = $redis->calls('eval');
}
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "z";r=1;t=180
perl {
    is($redis->calls('eval') - $stash{eval}, 0,
       "$name: once loaded again, EVALSHA only");
    $redis->cmd('SCRIPT', 'FLUSH');
}
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "z";r=0;t=240
GET /a.txt => 429
  X-Status: REJECTED



=== TEST 16: Redis restarted on the same port (empty data, empty script cache): decisions resume
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: PASSED
GET /a.txt => 429
  > X-Key: k
perl: $redis->restart;
# the denial cache still holds for this key (Retry-After 60 s)
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is($redis->scripts_run, 0, "$name: the cached denial did not ask");
}
# another key: the new Redis decides, after at most a reconnect
GET /a.txt => 200 poll 5
  > X-Key: n
  X-Status: PASSED
perl {
    my @keys = $redis->keys_matching('*');
    is("@keys", 'throttle:z:{n}', "$name: the restarted Redis has the key");
}



=== TEST 17: Redis restarted: the very next request (another key) is decided, not an error
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt x2 => 200
  > X-Key: before
  X-Status: PASSED
perl {
    $redis->restart;
    ok(wait_until(5, sub { !Processes::closed_by_peer($redis->port) }),
       "$name: nginx closes its ends of the old connections");
}
GET /a.txt => 200
  > X-Key: after
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  > X-Key: after
  X-Status: PASSED
  RateLimit: "z";r=0;t=120



=== TEST 18: reload keeps deciding through Redis; the state is Redis's
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=2 redis=main;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=2;t=60
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- requests_after_reload
perl: $stash{calls} = $redis->scripts_run;
GET /a.txt => 200
  > X-Key: k
  X-Gen: 2
  RateLimit: "z";r=1;t={120-}
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=0;t={180-}
GET /a.txt => 429
  > X-Key: k
perl {
    is($redis->scripts_run - $stash{calls}, 2,
       "$name: after the reload, Redis decides (the 429 from its last answer)");
}



=== TEST 19: reload to another Redis server: the new one decides
--- redis
redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=2 redis=main;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=2;t=60
--- reload_http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT_2;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=2 redis=main;
--- requests_after_reload
# the second server has no state for k: fresh
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=2;t=60
perl {
    is(join(' ', $redis2->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in the new server");
    is($redis->scripts_run, 1, "$name: the old server got one call");
}



=== TEST 20: keepalive=N: at most N connections per worker, whatever the load
--- redis
redis
--- http_config
throttle_redis one server=127.0.0.1:$TEST_REDIS_PORT keepalive=1 prefix=one:;
throttle_redis three server=127.0.0.1:$TEST_REDIS_PORT keepalive=3 prefix=three:;
throttle_zone $http_x_key zone=a:1m rate=1r/m burst=100 redis=one;
throttle_zone $http_x_key zone=b:1m rate=1r/m burst=100 redis=three;
--- config
location = /a.txt {
    throttle zone=a;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
perl {
    for my $round (1 .. 3) {
        my @res = (parallel_requests(30, 'GET /a.txt', 'X-Key' => "k$round"),
                   parallel_requests(30, 'GET /b.txt', 'X-Key' => "k$round"));
        is(scalar(grep { ($_->{status} // 0) == 200 } @res), 60,
           "$name: round $round: 60 passed");
    }
    my @clients = grep { !/\buser=harness\b/ }
                  split /\n/, $redis->cmd('CLIENT', 'LIST');
    my $n = @clients;
    cmp_ok($n, '<=', 2 * 1 + 2 * 3,
           "$name: $n connections from nginx: at most 2 workers x (1 + 3)")
        or diag(join "\n", @clients);
    cmp_ok($n, '>=', 1, "$name: (and some)");
}



=== TEST 21: cached denials count down: Retry-After and t= a second later
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location / {
    throttle zone=z;
    add_header X-Retry $throttle_retry_after always;
    add_header X-Reset $throttle_reset always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
GET /a.txt => 429
  > X-Key: k
  Retry-After: 60
  X-Retry: 60
  X-Reset: 60
sleep 1.2
perl: $stash{calls} = $redis->script_calls;
GET /a.txt => 429
  > X-Key: k
  Retry-After: 59
  X-Retry: 59
  X-Reset: 59
  RateLimit: "z";r=0;t=59
perl {
    is($redis->script_calls - $stash{calls}, 0, "$name: from the cache");
}



=== TEST 22: a small zone evicts cached denials: answers stay right (Redis has the truth)
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:32k rate=1r/m burst=0 redis=main;
--- requests
perl {
    my %st;
    for my $round (1 .. 3) {
        for my $batch (0 .. 39) {
            for my $res (map { parallel_requests(1, 'GET /a.txt', 'X-Key' => "k$_") }
                         $batch * 20 .. $batch * 20 + 19) {
                $st{$round}{ ($res->{status} // 'none') . ' '
                             . (header($res, 'X-Status') // '') }++;
            }
        }
    }
    is_deeply($st{1}, { '200 PASSED' => 800 }, "$name: 800 keys: first requests pass");
    is_deeply($st{2}, { '429 REJECTED' => 800 }, "$name: second ones are rejected");
    is_deeply($st{3}, { '429 REJECTED' => 800 },
              "$name: third ones too, cached or not");
}



=== TEST 23: reloads do not leak Redis connections: old workers close theirs
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1000 redis=main;
--- requests
perl {
    my $nginx_clients = sub {
        scalar grep { !/\buser=harness\b/ }
               split /\n/, $redis->cmd('CLIENT', 'LIST');
    };
    for my $round (1 .. 3) {
        my @res = parallel_requests(20, 'GET /a.txt', 'X-Key' => "r$round");
        is(scalar(grep { (header($_, 'X-Status') // '') eq 'PASSED' } @res),
           20, "$name: round $round: 20 decided by Redis");
        ok(reload(), "$name: reload $round");
    }
    my @res = parallel_requests(20, 'GET /a.txt', 'X-Key' => 'last');
    is(scalar(grep { (header($_, 'X-Status') // '') eq 'PASSED' } @res),
       20, "$name: after 3 reloads: 20 decided by Redis");
    # 2 workers x keepalive 2; old workers' connections gone
    my $n = wait_until(3, sub { my $n = $nginx_clients->(); $n <= 4 ? $n || '0E0' : 0 });
    ok($n, "$name: at most 4 connections from nginx after 3 reloads")
        or diag("connections now: " . $nginx_clients->() . "\n"
                . $redis->cmd('CLIENT', 'LIST'));
}



=== TEST 24: every answer of Redis's updates the denial cache: after an admission, a cached 429 answers from the TAT it left
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/s burst=2 redis=main;
--- config
location / {
    throttle zone=z cost=$http_x_cost;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  > X-Cost: 3
  RateLimit: "z";r=0;t=3
perl {
    # T = 1 s, limit 3: the TAT is t0 + 3 s. From t0 + 1 s to t0 + 2 s
    # every answer below is the same whenever it comes.
    sleep 1.3;
    $stash{calls} = $redis->scripts_run;
}
GET /a.txt => 429
  > X-Key: k
  > X-Cost: 3
  X-Status: REJECTED
  Retry-After: 2
  RateLimit: "z";r=1;t=2
GET /a.txt => 200
  > X-Key: k
  > X-Cost: 1
  RateLimit: "z";r=0;t=3
GET /a.txt => 429
  > X-Key: k
  > X-Cost: 3
  X-Status: REJECTED
  Retry-After: 3
  RateLimit: "z";r=0;t=3
perl {
    is($redis->scripts_run - $stash{calls}, 1,
       "$name: Redis decided only the admission; both 429s came from the zone");
    my $ttl = $redis->cmd('PTTL', 'throttle:z:{k}');
    ok($ttl > 2000 && $ttl <= 3000, "$name: ... and Redis's TAT is the one answered ($ttl ms)");
}



=== TEST 25: a cost that can never fit gets the key's fields, as Redis holds them, never a fresh key's
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
throttle_zone $http_x_key zone=l:1m rate=1r/m burst=0;
--- config
location /s/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=z cost=$http_x_cost;
}
location /l/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=l cost=$http_x_cost;
}
--- requests
# as a local zone answers
GET /l/a.txt => 200
  > X-Key: a
  > X-Cost: 1
  RateLimit: "l";r=0;t=60
GET /l/a.txt => 429
  > X-Key: a
  > X-Cost: 3
  no Retry-After
  RateLimit: "l";r=0;t={60-}
GET /s/a.txt => 200
  > X-Key: a
  > X-Cost: 1
  RateLimit: "z";r=0;t=60
GET /s/a.txt => 429
  > X-Key: a
  > X-Cost: 3
  no Retry-After
  RateLimit: "z";r=0;t={60-}
perl {
    # bob's key was used by another node: this one holds nothing of it
    $redis->cmd('SET', 'throttle:z:{bob}', $redis->time_us + 40e6, 'PX', 40_000);
    $stash{calls} = $redis->scripts_run;
}
GET /s/a.txt => 429
  > X-Key: bob
  > X-Cost: 3
  no Retry-After
  RateLimit: "z";r=0;t={40-}
GET /s/a.txt => 429
  > X-Key: bob
  > X-Cost: 5
  no Retry-After
  RateLimit: "z";r=0;t={40-}
perl {
    is($redis->scripts_run - $stash{calls}, 1,
       "$name: Redis answered the first, the zone the next from that answer");
    is($redis->cmd('GET', 'throttle:z:{bob}') > 0 && $redis->cmd('PTTL', 'throttle:z:{bob}') <= 40_000,
       1, "$name: nothing charged");
}
