# SPDX-License-Identifier: BSD-2-Clause
# Plans (docs/plans.md): rate= and burst= of throttle_zone from variables,
# read per request. Three plans in one zone, from a map of X-Plan, in
# local, strict and async mode: each key gets exactly its plan's limit,
# and the headers and variables show its plan's policy; a key that changes
# plans mid-burst keeps its state (GCRA: its TAT; fixed_window: its
# count); values the static form refuses get throttle_on_error's answer
# and one log line a second per zone and worker; nginx -t accepts
# variables and refuses what it refused before.
#
# Rates are slow (per hour) so that the milliseconds a block takes never
# change an expected value:
#
#   plan        rate    burst  limit (q)  T      w (T x q)
#   free        10r/h   2      3          360 s  1080
#   pro         20r/h   20     21         180 s  3780
#   enterprise  60r/h   40     41          60 s  2460

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time);

use Clock ();
use RedisChecks qw(async_key);
use ThrottleTest;

require_redis_module();

# How many units of T microseconds a key's TAT (in Redis) is ahead of
# Redis's clock, as a test: N units charged since the block's nginx
# started, so TAT - TIME is in (N*T - elapsed, N*T].
sub ThrottleTest::Step::holds_units {
    my ($redis, $key, $units, $t_us, $label) = @_;
    my $tat = $redis->cmd('GET', $key);
    my $now = $redis->time_us;
    my $elapsed = (time - $ThrottleTest::Step::CURRENT->{started}) * 1e6;
    my $ahead = defined $tat ? $tat - $now : undef;
    my $ok = defined $ahead && $ahead <= $units * $t_us
        && $ahead > $units * $t_us - $elapsed - 1000;
    Test::More::ok($ok, "$label: $key holds $units units of "
                   . $t_us / 1e6 . ' s');
    Test::More::diag("$key: TAT - TIME = " . ($ahead // 'absent') . ' us')
        unless $ok;
}

# A key of a plan spends its whole limit at once: q requests pass, the
# next is refused with the plan's Retry-After (its T); the first's and the
# refusal's fields are the plan's (q and w: its RateLimit-Policy). Each
# answered within $fast seconds, if given (async mode: no request waits).
sub ThrottleTest::Step::spend_plan {
    my ($name, $zone, $key, $plan, $q, $w, $t, $fast) = @_;
    my @h = ('X-Key' => $key, 'X-Plan' => $plan);
    my $what = "$name: $key ($plan)";
    my $first = ThrottleTest::Step::request('GET /a.txt', @h);
    my @res = ($first, map { ThrottleTest::Step::request('GET /a.txt', @h) }
                           2 .. $q + 1);
    my $refused = $res[-1];
    is(join(' ', map { $_->{status} // 'none' } @res),
       join(' ', (200) x $q, 429), "$what: $q of its plan pass, then 429");
    is(ThrottleTest::Step::header($first, 'RateLimit-Policy'),
       "\"$zone\";q=$q;w=$w", "$what: its plan's RateLimit-Policy");
    is(ThrottleTest::Step::header($first, 'RateLimit'),
       "\"$zone\";r=" . ($q - 1) . ";t=$t", "$what: its first RateLimit");
    is(ThrottleTest::Step::header($first, 'X-Limit'), $q,
       "$what: its \$throttle_limit");
    is(ThrottleTest::Step::header($refused, 'Retry-After'), $t,
       "$what: refused until its next unit");
    is(ThrottleTest::Step::header($refused, 'RateLimit'),
       "\"$zone\";r=0;t=$w", "$what: refused, its funnel full");
    if (defined $fast) {
        my @slow = grep { $_->{elapsed} >= $fast } @res;
        is(scalar @slow, 0, "$what: each answered in less than $fast s");
    }
}

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @plans, the maps of X-Plan to rate= and burst= (the
three plans, then values the static form refuses; no X-Plan gives an
empty rate); @redis_main, the Redis backend "main"; @headers, the
variables as response headers; and the server{} of a block with none of
its own: zone api on every location, with @headers.

--- @plans
map $http_x_plan $plan_rate {
    free        10r/h;
    pro         20r/h;
    enterprise  60r/h;
    fast        fast;
    zero        0r/s;
    unit        10r/x;
    huge        30r/m;
    default     "";
}
map $http_x_plan $plan_burst {
    free        2;
    pro         20;
    enterprise  40;
    default     0;
}

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

--- @headers
add_header X-Status $throttle_status always;
add_header X-Limit $throttle_limit always;
add_header X-Remaining $throttle_remaining always;

--- config
location / {
    throttle zone=api;
    @headers
}



=== TEST 1: local: each key gets exactly its plan's limit, with its plan's headers
--- http_config
@plans
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst;
--- requests
perl {
    spend_plan($name, 'api', 'alice', 'free', 3, 1080, 360);
    spend_plan($name, 'api', 'bob', 'pro', 21, 3780, 180);
    spend_plan($name, 'api', 'carol', 'enterprise', 41, 2460, 60);
}
--- no_error_log
throttle zone "api"



=== TEST 2: local: an upgrade mid-burst keeps the key's TAT; the new plan counts from it
--- http_config
@plans
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst;
--- requests
# free's 3 units take 3 x 360 s = 1080 s of the funnel
GET /a.txt x3 => 200
  > X-Key: dave
  > X-Plan: free
GET /a.txt => 429
  > X-Key: dave
  > X-Plan: free
# pro's tolerance is 21 x 180 s = 3780 s: 1080 s are 6 of its units, so
# 15 more, then pro's own Retry-After
GET /a.txt => 200
  > X-Key: dave
  > X-Plan: pro
  RateLimit-Policy: "api";q=21;w=3780
  RateLimit: "api";r=14;t=1260
GET /a.txt x14 => 200
  > X-Key: dave
  > X-Plan: pro
GET /a.txt => 429
  > X-Key: dave
  > X-Plan: pro
  Retry-After: 180
  RateLimit: "api";r=0;t=3780
# back to free: 3780 s ahead, more than free's 1080 s tolerance
GET /a.txt => 429
  > X-Key: dave
  > X-Plan: free
  Retry-After: 3060
  RateLimit-Policy: "api";q=3;w=1080
  RateLimit: "api";r=0;t=3780



=== TEST 3: local fixed_window: a key changing plans keeps its window's count
--- http_config
@plans
throttle_zone $http_x_key zone=win:1m rate=$plan_rate burst=$plan_burst
              algorithm=fixed_window;
--- config
location / {
    throttle zone=win;
    @headers
}
--- requests
# the hour's window must not turn during the block
perl: Clock::hour_guard(30);
GET /a.txt x12 => 200
  > X-Key: erin
  > X-Plan: free
GET /a.txt => 429
  > X-Key: erin
  > X-Plan: free
  RateLimit-Policy: "win";q=12;w=3600
# pro's limit is 40 an hour: 28 more in the same window
GET /a.txt => 200
  > X-Key: erin
  > X-Plan: pro
  RateLimit-Policy: "win";q=40;w=3600
  X-Remaining: 27
GET /a.txt x27 => 200
  > X-Key: erin
  > X-Plan: pro
GET /a.txt => 429
  > X-Key: erin
  > X-Plan: pro
  X-Remaining: 0
GET /a.txt => 429
  > X-Key: erin
  > X-Plan: free
  X-Limit: 12
  X-Remaining: 0



=== TEST 4: values the static form refuses get throttle_on_error's answer, logged once a second
--- http_config
@plans
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst;
throttle_zone $http_x_key zone=logs:1m rate=$plan_rate burst=$plan_burst
              algorithm=sliding_log log_max=20;
--- config
location / {
    throttle zone=api;
    @headers
}
location = /b.txt {
    throttle zone=api;
    throttle_on_error deny;
    @headers
}
location = /index.html {
    throttle zone=logs;
    @headers
}
--- requests
# two in a row on one connection (one worker): one line
keepalive {
GET /a.txt => 200
  > X-Key: frank
  > X-Plan: fast
  X-Status: ERROR_ALLOWED
  no RateLimit
  no RateLimit-Policy
GET /b.txt => 429
  > X-Key: frank
  > X-Plan: fast
  X-Status: ERROR_DENIED
  no RateLimit
}
sleep 1.1
GET /b.txt => 429
  > X-Key: frank
  > X-Plan: zero
  X-Status: ERROR_DENIED
sleep 1.1
GET /a.txt => 200
  > X-Key: frank
  > X-Plan: unit
  X-Status: ERROR_ALLOWED
sleep 1.1
GET /a.txt => 200
  > X-Key: frank
  X-Status: ERROR_ALLOWED
GET /index.html => 200
  > X-Key: frank
  > X-Plan: huge
  X-Status: ERROR_ALLOWED
# a good value of the same zone still decides
GET /index.html => 200
  > X-Key: frank
  > X-Plan: free
  X-Status: PASSED
  RateLimit-Policy: "logs";q=12;w=3600
perl {
    my @fast = grep { /rate "fast"/ } split /\n/, error_log();
    is(scalar @fast, 1, "$name: two bad values in a row: one line");
}
--- error_log
~ \[error\] .*throttle zone "api": rate "fast" must look like 30r/m \(units: r/s, r/m, r/h, r/d\); the request gets throttle_on_error's answer
throttle zone "api": rate "0r/s" must be greater than zero
throttle zone "api": rate "10r/x" has an unknown unit (use r/s, r/m, r/h or r/d)
throttle zone "api": rate "" is empty
throttle zone "logs": rate=30r/m burst=0 keeps 30 timestamps per key, more than log_max=20



=== TEST 5: strict: Redis decides each key by its plan; an upgrade keeps the TAT
--- redis
redis
--- http_config
@plans
@redis_main
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst
              redis=main;
--- requests
perl {
    spend_plan($name, 'api', 'alice', 'free', 3, 1080, 360);
    spend_plan($name, 'api', 'bob', 'pro', 21, 3780, 180);
    spend_plan($name, 'api', 'carol', 'enterprise', 41, 2460, 60);
}
perl {
    holds_units($redis, 'throttle:api:{alice}', 3, 360e6, $name);
    holds_units($redis, 'throttle:api:{bob}', 21, 180e6, $name);
    holds_units($redis, 'throttle:api:{carol}', 41, 60e6, $name);
}
# alice upgrades: her 1080 s are 6 of pro's units, the zone's memory of
# her rejection (a bound of her TAT) does not refuse pro's 15 more
GET /a.txt x15 => 200
  > X-Key: alice
  > X-Plan: pro
GET /a.txt => 429
  > X-Key: alice
  > X-Plan: pro
  Retry-After: 180
  RateLimit: "api";r=0;t=3780
perl {
    holds_units($redis, 'throttle:api:{alice}', 21, 180e6, "$name: upgraded");
}
--- no_error_log
throttle zone "api"



=== TEST 6: async: decided at once by the plan; each key syncs at its own rate
--- redis
redis
--- http_config
@plans
@redis_main
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst
              redis=main sync=async;
--- requests
perl {
    spend_plan($name, 'api', 'alice', 'free', 3, 1080, 360, 0.4);
    spend_plan($name, 'api', 'bob', 'pro', 21, 3780, 180, 0.4);
    spend_plan($name, 'api', 'carol', 'enterprise', 41, 2460, 60, 0.4);
}
perl {
    my %want = (alice => [3, 360e6], bob => [21, 180e6], carol => [41, 60e6]);
    my @keys = map { main::async_key('api', $_) } sort keys %want;
    ok(wait_until(3, sub { !grep { !$redis->cmd('EXISTS', $_) } @keys }),
       "$name: the three keys reach Redis");
    # the second sync of each key has run (nothing more to send)
    sleep 0.5;
    for my $user (sort keys %want) {
        holds_units($redis, main::async_key('api', $user), @{ $want{$user} },
                    $name);
    }
}
--- no_error_log
cannot sync with Redis
throttle zone "api"



=== TEST 7: nginx -t accepts variables in rate= and burst=, alone, together, or within text
--- http_config
@plans
throttle_zone $http_x_key zone=both:1m rate=$plan_rate burst=$plan_burst;
throttle_zone $http_x_key zone=rate:1m rate=$plan_rate burst=5;
throttle_zone $http_x_key zone=burst:1m rate=10r/m burst=$plan_burst;
throttle_zone $http_x_key zone=text:1m rate=${plan_rate} burst=1$plan_burst;
--- config
@headers
location = /a.txt {
    throttle zone=rate;
}
location = /b.txt {
    throttle zone=burst;
}
location = /index.html {
    throttle zone=both;
}
location /dir/ {
    throttle zone=text;
}
--- requests
GET /a.txt => 200
  > X-Key: gina
  > X-Plan: free
  RateLimit-Policy: "rate";q=6;w=2160
  RateLimit: "rate";r=5;t=360
# the same key at pro's rate: its TAT (360 s) is 2 of pro's units
GET /a.txt => 200
  > X-Key: gina
  > X-Plan: pro
  RateLimit-Policy: "rate";q=6;w=1080
  RateLimit: "rate";r=3;t=540
GET /b.txt => 200
  > X-Key: gina
  > X-Plan: pro
  RateLimit-Policy: "burst";q=21;w=126
  RateLimit: "burst";r=20;t=6
GET /index.html => 200
  > X-Key: gina
  > X-Plan: enterprise
  RateLimit-Policy: "both";q=41;w=2460
  RateLimit: "both";r=40;t=60
GET /dir/ => 200
  > X-Key: gina
  > X-Plan: free
  RateLimit-Policy: "text";q=13;w=4680
  RateLimit: "text";r=12;t=360



=== TEST 8: a constant bad value still fails nginx -t
--- http_config
map $http_x_plan $plan { default 1r/s; }
throttle_zone $http_x_key zone=z:1m rate=$plan burst=-1;
--- must_die
invalid burst "burst=-1" in "throttle_zone": it is not a non-negative integer



=== TEST 9: a constant burst= no rate could fit a sliding_log's log_max= fails nginx -t
--- http_config
map $http_x_plan $plan { default 1r/s; }
throttle_zone $http_x_key zone=z:1m rate=$plan burst=2000 algorithm=sliding_log;
--- must_die
~ "throttle_zone" "z": rate=1r/s burst=2000 keeps 2001 timestamps per key, more than log_max=1000.*whatever the variable gives



=== TEST 10: concurrent= zones take no rate= or burst=, variable or not
--- http_config
map $http_x_plan $plan { default 1r/s; }
throttle_zone $http_x_key zone=z:1m concurrent=3 rate=$plan;
--- must_die
"throttle_zone" "z": "rate=" is for a zone of a rate; "concurrent=" limits requests in flight



=== TEST 11: a reload to plans keeps a local zone's keys: a key's state carries over
--- http_config
throttle_zone $http_x_key zone=api:1m rate=10r/h burst=2;
--- requests
GET /a.txt x3 => 200
  > X-Key: ivy
GET /a.txt => 429
  > X-Key: ivy
  RateLimit-Policy: "api";q=3;w=1080
--- reload_http_config
@plans
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst;
--- requests_after_reload
# the same plan as before the reload: still refused
GET /a.txt => 429
  > X-Key: ivy
  > X-Plan: free
  Retry-After: {360-}
# pro: the 1080 s ivy spent are 6 of its 21 units
GET /a.txt x15 => 200
  > X-Key: ivy
  > X-Plan: pro
GET /a.txt => 429
  > X-Key: ivy
  > X-Plan: pro
  RateLimit-Policy: "api";q=21;w=3780



=== TEST 12: a reload that makes an async zone's rate= a variable is refused
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=api:1m rate=10r/h burst=2 redis=main sync=async;
--- requests
GET /a.txt => 200
  > X-Key: jay
--- reload_http_config
@plans
@redis_main
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst
              redis=main sync=async;
--- reload_fails
~ \[emerg\] .*throttle_zone "api" changed rate= to or from a variable in sync=async; rename the zone or change its size to start afresh
--- requests_after_reload
GET /a.txt => 200
  > X-Key: jay
  RateLimit-Policy: "api";q=3;w=1080



=== TEST 13: a throttle_api call is decided by the plan its own request gives
--- http_config
@plans
throttle_zone $http_x_key zone=api:1m rate=$plan_rate burst=$plan_burst;
--- config
location = /throttle {
    throttle_api zones=api;
}
--- requests
GET /throttle?zone=api&key=kim => 200
  > X-Plan: pro
  RateLimit-Policy: "api";q=21;w=3780
  RateLimit: "api";r=20;t=180
  body ~ "limit":21,"remaining":20,
GET /throttle?zone=api&key=kim => 200
  > X-Plan: enterprise
  RateLimit-Policy: "api";q=41;w=2460
  body ~ "limit":41,
# no X-Plan: an empty rate, which makes no plan
GET /throttle?zone=api&key=kim => 200
  no RateLimit
  body ~ "status":"ERROR_ALLOWED"
--- error_log
throttle zone "api": rate "" is empty
