# SPDX-License-Identifier: BSD-2-Clause
# throttle_api with Redis-backed zones: strict mode (one script per check
# in Redis, a rejected set's charges refunded, one budget with HTTP
# requests), async mode (decided in the zone, synced to Redis), random
# HTTP requests and API calls of one key decided as one funnel in both,
# and a stopped Redis: the endpoint answers per throttle_on_error within
# the backend's timeout, while other requests are served at once.
#
# Rates are slow (1r/m, 1r/h) so that the milliseconds a block takes never
# change an expected count.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time);

use ThrottleApi qw(json_of api_get api_post answer_is one_funnel);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# Writes a request on a connection of its own and returns the connection
# and when it was written, without waiting for the answer.
sub send_only {
    my ($nginx, $what) = @_;
    my $sock = ThrottleTest::connect_to($nginx) or die "connect: $!\n";
    my ($method, $uri) = split ' ', $what;
    syswrite $sock, "$method $uri HTTP/1.1\r\nHost: localhost\r\n"
                    . "Connection: close\r\n\r\n";
    return ($sock, time);
}

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: strict: Redis decides each check with one script; HTTP requests and API calls share the key in Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2 redis=main;
--- config
location / {
    throttle zone=reply;
}
location = /throttle {
    throttle_api zones=reply;
}
--- requests
perl: $stash{scripts} = $redis->scripts_run;
GET /throttle?zone=reply&key=alice => 200
  RateLimit: "reply";r=2;t=60
  body ~ "status":"PASSED","limit":3,"remaining":2,
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=1;t=120
POST /throttle => 200
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice"}
  RateLimit: "reply";r=0;t=180
perl {
    is($redis->scripts_run - $stash{scripts}, 3,
       "$name: one script for each decision");
    my $tat = $redis->cmd('GET', 'throttle:reply:{alice}');
    my $ahead = ($tat // 0) - $redis->time_us;
    ok($ahead > 170e6 && $ahead <= 180e6,
       "$name: the key's TAT in Redis is 3 x 60 s ahead")
        or diag("TAT " . ($tat // 'none'));
    my ($res, $json) = main::api_get("$name: 4th", 'zone=reply&key=alice');
    main::answer_is("$name: 4th", $res, $json, 429, 0,
        { zone => 'reply', key => 'alice', status => 'REJECTED', limit => 3,
          remaining => 0, reset_after_ms => 180_000,
          retry_after_ms => 60_000, delay_ms => 0 });
    like(header($res, 'Retry-After'), qr/^(5\d|60)$/, "$name: Retry-After");
    # what another nginx wrote to Redis decides: bob, spent there
    $redis->cmd('SET', 'throttle:reply:{bob}', $redis->time_us + 180e6,
                'PX', 180_000);
    ($res, $json) = main::api_get("$name: bob", 'zone=reply&key=bob');
    main::answer_is("$name: bob, spent in Redis", $res, $json, 429, 0,
        { status => 'REJECTED', remaining => 0, retry_after_ms => 60_000 });
}
# answers that waited for Redis keep the connection alive
keepalive {
GET /throttle?zone=reply&key=kim => 200
  RateLimit: "reply";r=2;t=60
POST /throttle => 200
  > Content-Type: application/json
  >> {"zone":"reply","key":"kim"}
  RateLimit: "reply";r=1;t=120
GET /a.txt => 200
  > X-User-Id: kim
  RateLimit: "reply";r=0;t=180
}



=== TEST 2: strict: a set another zone rejects is charged to none: Redis's charge is refunded
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2 redis=main;
throttle_zone $http_x_user_id zone=once:1m rate=1r/d redis=main;
--- config
location = /throttle {
    throttle_api zones=reply,once;
}
--- requests
perl {
    my $both = { checks => [ { zone => 'reply', key => 'alice' },
                             { zone => 'once', key => 'alice' } ] };
    my ($res, $json) = main::api_post("$name: 1st", $both);
    main::answer_is("$name: 1st", $res, $json, 200, 1,
        { zone => 'reply', status => 'PASSED', remaining => 2 },
        { zone => 'once', status => 'PASSED', remaining => 0 });
    ($res, $json) = main::api_post("$name: 2nd", $both);
    main::answer_is("$name: 2nd", $res, $json, 429, 0,
        { zone => 'reply', status => 'PASSED', remaining => 1 },
        { zone => 'once', status => 'REJECTED', remaining => 0 });
    # the refund is sent once the answer is given: wait for it
    ok(wait_until(5, sub {
        my $tat = $redis->cmd('GET', 'throttle:reply:{alice}') // 0;
        my $ahead = $tat - $redis->time_us;
        $ahead > 50e6 && $ahead <= 60e6;
    }), "$name: reply's TAT in Redis is back to one charge");
    ($res, $json) = main::api_get("$name: peek", 'zone=reply&key=alice&cost=0');
    main::answer_is("$name: peek", $res, $json, 200, 1,
        { zone => 'reply', remaining => 2 });
}



=== TEST 3: async: decided in the zone with HTTP requests of the key, and synced to Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=4 redis=main
              sync=async sync_interval=50ms;
--- config
location / {
    throttle zone=reply;
}
location = /throttle {
    throttle_api zones=reply;
}
--- requests
perl: $stash{scripts} = $redis->scripts_run;
GET /throttle?zone=reply&key=alice&cost=2 => 200
  RateLimit: "reply";r=3;t=120
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=2;t={180-}
POST /throttle => 200
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":2}
  RateLimit: "reply";r=0;t={300-}
GET /throttle?zone=reply&key=alice => 429
GET /a.txt => 429
  > X-User-Id: alice
perl {
    my $key = RedisServer::async_key('throttle:', 'reply', 'alice');
    ok(wait_until(5, sub {
        my $tat = $redis->cmd('GET', $key) // 0;
        $tat - $redis->time_us > 290e6;
    }), "$name: Redis has the 5 units of $key");
    cmp_ok($redis->scripts_run - $stash{scripts}, '<', 5,
           "$name: synced, not a script per decision");
}



=== TEST 4: strict: random HTTP requests and API calls of one key are decided as one funnel
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/h burst=39 redis=main;
throttle_zone $http_x_user_id zone=wide:1m rate=1r/h burst=1000 redis=main;
--- config
location / {
    throttle zone=reply cost=$http_x_cost;
}
location = /throttle {
    throttle_api zones=reply,wide;
}
--- requests
perl: main::one_funnel($name, 'alice', 40, 80);



=== TEST 5: async: random HTTP requests and API calls of one key are decided as one funnel
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/h burst=39 redis=main
              sync=async sync_interval=20ms;
throttle_zone $http_x_user_id zone=wide:1m rate=1r/h burst=1000 redis=main
              sync=async sync_interval=20ms;
--- config
location / {
    throttle zone=reply cost=$http_x_cost;
}
location = /throttle {
    throttle_api zones=reply,wide;
}
--- requests
perl: main::one_funnel($name, 'alice', 40, 80);



=== TEST 6: strict, Redis stopped: answers per throttle_on_error within the timeout, other requests served meanwhile, decisions resume after
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=9 redis=main;
--- config
location = /throttle {
    throttle_api zones=reply;
}
location = /deny {
    throttle_api zones=reply;
    throttle_on_error deny;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /throttle?zone=reply&key=alice => 200
  body ~ "status":"PASSED"
perl {
    $redis->pause;
    # a client that goes away while its call waits
    my ($gone) = main::send_only($nginx, 'GET /throttle?zone=reply&key=erin');
    close $gone;
    # a GET and a POST wait for the stopped Redis...
    my ($get, $t0) = main::send_only($nginx, 'GET /throttle?zone=reply&key=alice');
    my $post = ThrottleTest::connect_to($nginx);
    my $body = '{"zone":"reply","key":"bob"}';
    syswrite $post, "POST /deny HTTP/1.1\r\nHost: localhost\r\n"
                    . "Content-Type: application/json\r\nContent-Length: "
                    . length($body) . "\r\nConnection: close\r\n\r\n$body";
    # ...while files are served at once, and metrics too
    my $res = request('GET /a.txt');
    is($res->{status}, 200, "$name: a file is served while they wait");
    cmp_ok($res->{elapsed}, '<', 0.5, "$name: ... at once");
    is(request('GET /metrics')->{status}, 200, "$name: ... and /metrics");
    ok(!IO::Select->new($get, $post)->can_read(0),
       "$name: ... before the API has answered");
    # then each is answered at the timeout, per throttle_on_error
    $res = ThrottleTest::http_read($get, { method => 'GET' });
    my $took = time - $t0;
    ok($took > 0.9 && $took < 2, "$name: GET answered after the 1 s timeout")
        or diag("took $took s");
    my $json = main::json_of("$name: GET", $res);
    main::answer_is("$name: GET", $res, $json, 200, 1,
        { zone => 'reply', key => 'alice', status => 'ERROR_ALLOWED',
          limit => undef, remaining => undef, reset_after_ms => undef,
          retry_after_ms => undef, delay_ms => undef });
    ok(!defined header($res, 'RateLimit'), "$name: GET: no RateLimit");
    $res = ThrottleTest::http_read($post, { method => 'POST' });
    $json = main::json_of("$name: POST", $res);
    main::answer_is("$name: POST to /deny", $res, $json, 429, 0,
        { zone => 'reply', key => 'bob', status => 'ERROR_DENIED',
          remaining => undef });
    ok(!defined header($res, 'Retry-After'), "$name: POST: no Retry-After");
    # many at once, on both workers: each answered within the bound
    my @all = parallel_requests(10, 'GET /throttle?zone=reply&key=carol');
    is(scalar(grep { ($_->{body} // '') =~ /"status":"ERROR_ALLOWED"/ } @all),
       10, "$name: 10 at once: all ERROR_ALLOWED");
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @all;
    cmp_ok($max, '<', 2, "$name: 10 at once: the slowest in < 2 s");
    my $m = metrics();
    is($m->{'nginx_throttle_requests_total{zone="reply",result="error_allowed"}'},
       12, "$name: 12 checks counted error_allowed (erin's too)");
    is($m->{'nginx_throttle_requests_total{zone="reply",result="error_denied"}'},
       1, "$name: 1 counted error_denied");
    $redis->resume;
}
GET /throttle?zone=reply&key=dave => 200 poll 5
  body ~ "status":"PASSED","limit":10,"remaining":9,
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): no reply within 1000 ms
