# SPDX-License-Identifier: BSD-2-Clause
# throttle_api's resets (docs/api.md, "Resetting a key"): with reset=on, a
# DELETE (its key in the query string or in a JSON body) makes a key
# fresh: a local zone empties its slot; a strict zone deletes the key in
# Redis and forgets its memory of Redis's rejections; an async zone drops
# the key's units not synced (the answer counts them) and deletes its
# name in Redis. Without reset=on a DELETE gets 405; nginx -t refuses a
# bad reset=; the documented allow/deny configuration refuses another
# address; malformed DELETEs get 400 and change nothing; a Redis that
# cannot answer gets 503. With two nginx on one Redis (first, before the
# blocks): what the other nginx keeps of the key after a reset, as
# docs/api.md says.

use strict;
use warnings;

use FindBin;
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep);

use Processes qw(read_file);
use RedisChecks ();
use RedisServer;
use Responses qw(hdr status_of ratelimit_of);
use ThrottleApi qw(json_of api_get api_delete reset_is error_is);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# The location docs/api.md's "Resetting a key" shows, as it is there.
sub documented_location {
    my $doc = read_file("$FindBin::Bin/../docs/api.md");
    my ($section) = $doc =~ /^## Resetting a key\n(.*?)^## /ms
        or die "docs/api.md has no \"Resetting a key\" section\n";
    my ($nginx) = $section =~ /```nginx\n(.*?)```/s
        or die "docs/api.md's \"Resetting a key\" has no nginx block\n";
    return $nginx;
}

# A sample of a scrape (ThrottleTest::Step::metrics()), 0 if absent.
sub sample {
    my ($m, $name, $zone) = @_;
    return $m->{"$name\{zone=\"$zone\"}"} // 0;
}

# A request to nginx from another loopback address than 127.0.0.1.
sub request_from {
    my ($nginx, $address, $what) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                     PeerPort => $nginx->{port},
                                     LocalAddr => $address, Proto => 'tcp',
                                     Timeout => 5)
        or die "connect from $address: $!\n";
    my $res = ThrottleTest::Http::http_exchange(
        $sock, ThrottleTest::Http::parse_request('request_from', $what), 0);
    close $sock;
    return $res;
}

# ---------------------------------------------------------------------------
# Two nginx on one Redis: what the other keeps of a key after a reset

my $wait = \&ThrottleTest::Step::wait_until;

sub reset_at {
    my ($node, $zone, $key) = @_;
    my $res = http_request($node, "DELETE /throttle?zone=$zone&key=$key");
    my $json = json_of("reset $zone $key", $res);
    return ($res, $json);
}

# Strict: the key in Redis is gone for every nginx, but the other nginx's
# memory of Redis's rejections still rejects it by itself until its bound
# passes (12r/m: a unit drains in 5 s), without asking Redis.
sub two_nodes_strict {
    my ($redis, $A, $B) = @_;
    my $name = 'two nginx, strict';
    my $get = sub { http_request($_[0], 'GET /a.txt', 'X-Key' => 'alice') };

    is(status_of($get->($A)), 200, "$name: A admits alice ($_)") for 1 .. 3;
    is(status_of($get->($A)), 429, "$name: A refuses the 4th");
    is(status_of($get->($B)), 429, "$name: B refuses her too (Redis said so)");
    my $scripts = $redis->script_calls;
    is(status_of($get->($B)), 429, "$name: B refuses her again");
    is($redis->script_calls - $scripts, 0,
       "$name: ... from its memory, without asking Redis");

    my ($res, $json) = reset_at($A, 'login', 'alice');
    ThrottleApi::reset_is("$name: reset at A", $res, $json, 'login', 'alice', 0);
    is($redis->cmd('EXISTS', 'throttle:login:{alice}'), 0,
       "$name: the key is gone from Redis");

    $res = $get->($A);
    is(status_of($res), 200, "$name: A admits alice again");
    is(hdr($res, 'RateLimit'), '"login";r=2;t=5',
       "$name: ... as a fresh key (Redis's answer)");

    $scripts = $redis->script_calls;
    $res = $get->($B);
    is(status_of($res), 429,
       "$name: B still refuses her: its memory of before the reset");
    is($redis->script_calls - $scripts, 0, "$name: ... without asking Redis");
    cmp_ok(hdr($res, 'Retry-After') // 0, '<=', 5,
           "$name: ... for at most the Retry-After it gave");

    # once its bound has passed B asks Redis, which has the fresh key
    ok($wait->(8, sub { status_of($get->($B)) == 200 }),
       "$name: B admits her once its memory's bound has passed");
}

# Async: the other nginx's view of the key stays as it was: with no sync
# of the key due, it refuses the key until that view has room, then
# charges it, and its syncs bring Redis's fresh state (12r/m: a unit
# drains in 5 s).
sub two_nodes_async {
    my ($redis, $A, $B) = @_;
    my $name = 'two nginx, async';
    my $key = RedisChecks::async_key('feed', 'bob');
    my $get = sub { http_request($_[0], 'GET /f.txt', 'X-Key' => 'bob') };
    my $peek = sub {
        (ratelimit_of(http_request($_[0], 'GET /peek.txt', 'X-Key' => 'bob')))[1]
            // -1;
    };

    is(status_of($get->($A)), 200, "$name: A admits bob ($_)") for 1 .. 3;
    ok($wait->(3, sub { $redis->cmd('EXISTS', $key) }),
       "$name: A's units reached Redis");
    # B touches the key (cost 0), and learns at its syncs what A spent
    ok($wait->(3, sub { $peek->($B) == 0 }), "$name: B's view: none left");
    # its two syncs of the key since its last touch are done (a refused
    # request touches nothing)
    sleep 0.5;
    is(status_of($get->($B)), 429, "$name: B refuses bob");

    my ($res, $json) = reset_at($A, 'feed', 'bob');
    ThrottleApi::reset_is("$name: reset at A", $res, $json, 'feed', 'bob', 0);
    is($redis->cmd('EXISTS', $key), 0, "$name: the key is gone from Redis");
    $res = $get->($A);
    is(status_of($res), 200, "$name: A admits bob again");
    is(hdr($res, 'RateLimit'), '"feed";r=2;t=5', "$name: ... as a fresh key");
    ok($wait->(3, sub { $redis->cmd('EXISTS', $key) }),
       "$name: A's new unit reached Redis");

    $res = $get->($B);
    is(status_of($res), 429, "$name: B still refuses bob: its own view");
    cmp_ok(hdr($res, 'Retry-After') // 0, '<=', 5,
           "$name: ... for at most the Retry-After it gives");

    # once its view has room, B admits bob and syncs: Redis's word (A's
    # one unit since the reset, and B's) replaces its view of before
    ok($wait->(8, sub { status_of($get->($B)) == 200 }),
       "$name: B admits bob once its view has room");
    ok($wait->(3, sub { $peek->($B) >= 1 }),
       "$name: B's view is the fresh key's after its syncs")
        or diag('r=' . $peek->($B));
}

sub two_nodes {
    my $redis = RedisServer->start;
    my $port = $redis->port;
    my %conf = (
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_key zone=login:1m rate=12r/m burst=2 redis=main;
throttle_zone \$http_x_key zone=feed:1m rate=12r/m burst=2 redis=main sync=async sync_interval=100ms;
HTTP
        config => <<'SERVER',
location = /a.txt {
    throttle zone=login;
}
location = /f.txt {
    throttle zone=feed;
    try_files /a.txt =404;
}
# cost 0: the node's view of the key, which it then syncs to read
location = /peek.txt {
    throttle zone=feed cost=0;
    try_files /a.txt =404;
}
location = /throttle {
    throttle_api zones=login,feed reset=on;
}
SERVER
    );
    my @logs = with_instances('two nginx', 2, \%conf,
                              sub { two_nodes_strict($redis, @_);
                                    two_nodes_async($redis, @_) });
    for my $i (0 .. $#logs) {
        my $n = $i ? 'B' : 'A';
        unlike($logs[$i], qr/exited on signal|\[alert\]|\[crit\]/,
               "two nginx: node $n: no crash, alert or crit in error.log");
        unlike($logs[$i], qr/throttle redis|cannot sync with Redis/,
               "two nginx: node $n: no Redis error logged");
    }
    $redis->stop;
}

two_nodes();

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis; @endpoint, an endpoint that resets and the metrics; and
a block's defaults: zone "reply" (3 requests at once, then one a minute)
limits every request, and the endpoint.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

--- @endpoint
location = /throttle {
    throttle_api zones=reply reset=on;
}
location = /metrics {
    throttle_metrics;
}

--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;

--- config
location / {
    throttle zone=reply;
}
@endpoint


=== TEST 1: local: DELETE empties the key's slot (the keys gauge drops) and the key is fresh; the JSON body does the same
--- requests
GET /a.txt x3 => 200
  > X-User-Id: alice
GET /a.txt => 429
  > X-User-Id: alice
perl {
    is(main::sample(metrics(), 'nginx_throttle_zone_keys', 'reply'), 1,
       "$name: the zone holds alice");
    my ($res, $json) = main::api_delete("$name: query", 'zone=reply&key=alice');
    main::reset_is("$name: query", $res, $json, 'reply', 'alice', 0);
    is(main::sample(metrics(), 'nginx_throttle_zone_keys', 'reply'), 0,
       "$name: ... and holds no key any more");
}
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=2;t=60
GET /a.txt x2 => 200
  > X-User-Id: alice
perl {
    my ($res, $json) = main::api_delete("$name: JSON", '',
                                        { zone => 'reply', key => 'alice' });
    main::reset_is("$name: JSON", $res, $json, 'reply', 'alice', 0);
    # a key the zone does not hold: nothing to do, and said so the same way
    ($res, $json) = main::api_delete("$name: bob", 'zone=reply&key=bob');
    main::reset_is("$name: bob, never seen", $res, $json, 'reply', 'bob', 0);
}
GET /throttle?zone=reply&key=alice&cost=0 => 200
  body ~ "remaining":3,"reset_after_ms":0,
--- error_log
throttle zone "reply": a key is reset through throttle_api; 0 units not synced were dropped



=== TEST 2: reset= is off by default: DELETE gets 405 with Allow, says what it needs, and resets nothing; with reset=on, Allow lists DELETE
--- config
location = /throttle {
    throttle_api zones=reply;
}
location = /off {
    throttle_api zones=reply reset=off;
}
location = /on {
    throttle_api zones=reply reset=on;
}
--- requests
GET /throttle?zone=reply&key=alice => 200
DELETE /throttle?zone=reply&key=alice => 405
  Allow: GET, HEAD, POST
  Content-Type: application/json
  body: {"error":"method not allowed: use GET, HEAD or POST (a DELETE resets a key where \"throttle_api\" has \"reset=on\")"}
DELETE /off?zone=reply&key=alice => 405
  Allow: GET, HEAD, POST
DELETE /throttle => 405
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice"}
  Allow: GET, HEAD, POST
PUT /on?zone=reply&key=alice => 405
  Allow: GET, HEAD, POST, DELETE
  body: {"error":"method not allowed: use GET, HEAD, POST or DELETE"}
PUT /throttle?zone=reply&key=alice => 405
  Allow: GET, HEAD, POST
  body: {"error":"method not allowed: use GET, HEAD or POST"}
GET /throttle?zone=reply&key=alice&cost=0 => 200
  body ~ "remaining":2,
--- no_error_log
a key is reset



=== TEST 3: nginx -t refuses a reset= that is neither on nor off, quoting it
--- config
location = /throttle {
    throttle_api zones=reply reset=yes;
}
--- must_die
invalid parameter "reset=yes" in "throttle_api": use on or off



=== TEST 4: nginx -t refuses reset=ON: the values are on and off, as nginx's flags
--- config
location = /throttle {
    throttle_api reset=ON zones=reply;
}
--- must_die
invalid parameter "reset=ON" in "throttle_api": use on or off



=== TEST 5: nginx -t refuses an empty reset=
--- config
location = /throttle {
    throttle_api zones=reply reset=;
}
--- must_die
invalid parameter "reset=" in "throttle_api": use on or off



=== TEST 6: the documented location (allow 127.0.0.1; deny all;) refuses a reset from another address, and resets from its own
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
throttle_zone $http_x_user_id zone=login:1m rate=1r/m burst=2;
--- config eval
"location / {\n    throttle zone=reply;\n}\n" . main::documented_location()
--- requests
GET /a.txt x3 => 200
  > X-User-Id: alice
perl {
    like(main::documented_location(), qr/allow 127\.0\.0\.1;.*deny all;/s,
         "$name: the documented location is the protected one");
    my $res = main::request_from($nginx, '127.0.0.2',
                                 'DELETE /throttle?zone=reply&key=alice');
    is($res->{status}, 403, "$name: from 127.0.0.2: 403");
    my ($peek, $json) = main::api_get("$name: peek",
                                      'zone=reply&key=alice&cost=0');
    is($json->{checks}[0]{remaining}, 0, "$name: ... and alice is still spent");
    ($res, $json) = main::api_delete("$name: own", 'zone=reply&key=alice');
    main::reset_is("$name: from 127.0.0.1", $res, $json, 'reply', 'alice', 0);
    ($peek, $json) = main::api_get("$name: peek after",
                                   'zone=reply&key=alice&cost=0');
    is($json->{checks}[0]{remaining}, 3, "$name: ... and alice is fresh");
}
--- error_log
access forbidden by rule



=== TEST 7: malformed DELETEs get 400 with a clear error, and change nothing
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
throttle_zone $http_x_user_id zone=streams:1m concurrent=3;
--- config
location = /throttle {
    throttle_api zones=reply,streams reset=on;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /throttle?zone=reply&key=alice&cost=2 => 200
perl {
    my @bad = (
        ['zone=reply', undef, 'missing "key"'],
        ['key=alice', undef, 'missing "zone"'],
        ['', undef, 'missing "zone"'],
        ['zone=nope&key=alice', undef,
         'unknown zone "nope": not one of this endpoint\'s zones='],
        ['zone=reply&key=', undef, '"key" is empty'],
        ['zone=reply&key=alice&cost=1', undef,
         'a reset takes "zone" and "key" only, not "cost"'],
        ['zone=reply&key=alice&settle=1', undef,
         'a reset takes "zone" and "key" only, not "settle"'],
        ['zone=reply&key=alice&kee=1', undef, 'unknown parameter "kee"'],
        ['zone=reply&key=%4', undef,
         'parameter "key" has a \'%\' not followed by two hex digits'],
        ['zone=streams&key=alice', undef,
         'zone "streams" is a "concurrent=" zone, whose places are held by '
         . 'requests still running and free themselves when these end '
         . '(within a lease if their nginx is gone): a reset cannot end them'],
        ['', '{"zone":"reply","key":"alice","cost":1}',
         'a reset takes "zone" and "key" only, not "cost"'],
        ['', '{"zone":"reply","kye":"alice"}', 'unknown field "kye"'],
        ['', '{"zone":"reply","key":7}', '"key" must be a string'],
        ['', '{"zone":"reply"}', 'missing "key"'],
        ['', '[]', 'the body must be a JSON object'],
        ['', '{"checks":[{"zone":"reply","key":"alice"},'
             . '{"zone":"reply","key":"bob"}]}', 'a reset resets one key'],
        ['zone=reply&key=alice', '{"zone":"reply","key":"alice"}',
         'a reset takes "zone" and "key" from the query string or from a '
         . 'JSON body, not both'],
    );
    for my $case (@bad) {
        my ($query, $body, $error) = @$case;
        my ($res) = main::api_delete("$name: $error", $query, $body);
        main::error_is("$name: " . ($body // $query), $res, 400, $error);
    }

    my $res = request('DELETE /throttle', 'Content-Type' => 'application/json',
                      \'{"zone":"reply","key":"alice"');
    is($res->{status}, 400, "$name: truncated JSON: 400");
    like(main::json_of("$name: truncated JSON", $res)->{error} // '',
         qr/^malformed JSON at byte \d+: /, "$name: ... says where");
    $res = request('DELETE /throttle', 'Content-Type' => 'text/plain',
                   \'{"zone":"reply","key":"alice"}');
    main::error_is("$name: text/plain", $res, 400,
                   'Content-Type must be application/json');

    my ($peek, $json) = main::api_get("$name: peek",
                                      'zone=reply&key=alice&cost=0');
    is($json->{checks}[0]{remaining}, 1, "$name: alice still has 1 left");
    is(main::sample(metrics(), 'nginx_throttle_zone_keys', 'reply'), 1,
       "$name: the zone still holds her");
}
--- no_error_log
a key is reset



=== TEST 8: strict: DELETE deletes the key in Redis and the zone's memory of Redis's rejections: the next request asks Redis, and passes
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2 redis=main;
--- requests
GET /a.txt x3 => 200
  > X-User-Id: alice
GET /a.txt => 429
  > X-User-Id: alice
perl {
    my $scripts = $redis->scripts_run;
    my $res = request('GET /a.txt', 'X-User-Id' => 'alice');
    is($res->{status}, 429, "$name: alice is refused");
    is($redis->scripts_run - $scripts, 0,
       "$name: ... from the zone's memory, without asking Redis");
    is($redis->cmd('EXISTS', 'throttle:reply:{alice}'), 1,
       "$name: Redis holds her key");

    my ($json);
    ($res, $json) = main::api_delete("$name: reset", 'zone=reply&key=alice');
    main::reset_is("$name: reset", $res, $json, 'reply', 'alice', 0);
    is($redis->cmd('EXISTS', 'throttle:reply:{alice}'), 0,
       "$name: her key is gone from Redis");
    $stash{scripts} = $redis->scripts_run;
}
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=2;t=60
perl {
    is($redis->scripts_run - $stash{scripts}, 1,
       "$name: Redis decided (the memory was forgotten)");
    # the JSON body form, for a key Redis does not hold
    my ($res, $json) = main::api_delete("$name: bob", '',
                                        { zone => 'reply', key => 'bob' });
    main::reset_is("$name: bob", $res, $json, 'reply', 'bob', 0);
}
--- no_error_log
throttle redis



=== TEST 9: async: DELETE drops the key's units not synced yet (the answer counts them, not as lost), empties its slot, and deletes its name in Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=4 redis=main sync=async sync_interval=60s;
--- requests
# the first round (taken at start) is over: the next is a minute away
sleep 0.6
perl {
    # what another nginx synced of alice
    $redis->cmd('SET', RedisChecks::async_key('reply', 'alice'),
                $redis->time_us + 60e6, 'PX', 120_000);
}
GET /a.txt x3 => 200
  > X-User-Id: alice
perl {
    my $m = metrics();
    is(main::sample($m, 'nginx_throttle_sync_pending_units', 'reply'), 3,
       "$name: 3 units wait for the next sync");
    is(main::sample($m, 'nginx_throttle_zone_keys', 'reply'), 1,
       "$name: the zone holds alice");
    my ($res, $json) = main::api_delete("$name: reset", '',
                                        { zone => 'reply', key => 'alice' });
    main::reset_is("$name: reset", $res, $json, 'reply', 'alice', 3);
    is($redis->cmd('EXISTS', RedisChecks::async_key('reply', 'alice')), 0,
       "$name: her name in Redis is gone");
    $m = metrics();
    is(main::sample($m, 'nginx_throttle_sync_pending_units', 'reply'), 0,
       "$name: no unit waits for a sync any more");
    is(main::sample($m, 'nginx_throttle_sync_lost_units_total', 'reply'), 0,
       "$name: ... and none counts as lost");
    is(main::sample($m, 'nginx_throttle_zone_keys', 'reply'), 0,
       "$name: the zone holds no key");
}
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=4;t=60
--- error_log
throttle zone "reply": a key is reset through throttle_api; 3 units not synced were dropped
--- no_error_log
throttle redis



=== TEST 10: strict, Redis stopped: 503 says the key is reset in this nginx but not in Redis; a bad DELETE is still a 400
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2 redis=main;
--- requests
perl {
    $redis->stop;
    my ($res, $json) = main::api_delete("$name: reset", 'zone=reply&key=alice');
    is($res->{status}, 503, "$name: 503");
    is(join(',', sort keys %{ $json // {} }), 'error', "$name: an error");
    like($json->{error} // '',
         qr/^zone "reply": the key is reset in this nginx, not in Redis: Redis /,
         "$name: it says the key is not reset in Redis")
        and note($json->{error});
    ($res) = main::api_delete("$name: bad", 'zone=reply');
    main::error_is("$name: bad", $res, 400, 'missing "key"');
}
--- error_log
throttle redis "main"
