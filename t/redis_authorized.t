# SPDX-License-Identifier: BSD-2-Clause
# throttle ... phase=authorized with Redis: strict and async zones keyed by
# the user an auth backend names (auth_request + auth_request_set), decided
# in nginx's precontent phase, once the access phase has let the request
# in. With a real auth backend (a second server of the same nginx, on a
# unix socket under the prefix, that knows three bearer tokens and logs
# each check) and real redis-server processes:
#
# - strict: burst+1 per user, whichever token; Redis holds what nginx
#   admitted; a request the backend refuses (401) costs no EVALSHA and
#   writes nothing, even to a zone keyed by the address, nor does its
#   error page; every algorithm admits exactly burst+1;
# - two nginx (2 workers each) sharing one Redis: exact across them,
#   alternating and all at once;
# - async: decided at once by the zone, the units reach Redis;
# - the wait for Redis happens after the access phase and blocks no
#   worker: a silent Redis answers nothing, throttle_on_error decides
#   within the timeout while other requests are served at once; Redis
#   stopped, then back;
# - a preaccess zone and an authorized zone in one location: each phase
#   charges Redis on its own (also when only the authorized zone's Redis
#   is down); try_files to a named location: one EVALSHA per request.
#
# In the default phase (preaccess) a zone keyed by $uid sees an empty key
# and limits nothing, and one keyed by the address counts the refused
# requests: without "phase=authorized", every part of this file has
# checks that fail.
#
# Rates are slow (1r/m; the windows 1r/d) so that the milliseconds a test
# takes never change an expected value.

use strict;
use warnings;

use IO::Select;
use POSIX qw(ceil);
use Test::More;
use Time::HiRes qw(sleep time);

use Processes qw(read_file);
use RedisServer;
use Responses qw(status_of count_statuses);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# The auth backend (Test::Base filters: "--- http_config auth_backend",
# "--- config behind_auth"; the two-node part calls them too)

# The backend's server, before the block's http_config: 200 with X-User
# for a known bearer token (alice has two), 401 otherwise; each check is a
# line of logs/auth.log. The limited server's own access_log stays off.
# The socket's name has the limited server's port in it: when nginx does
# not start because another process took that port, the runner starts it
# again on another one, and the socket file the failed start left behind
# must not be in the way.
sub auth_backend {
    my ($http) = @_;
    return <<'AUTH' . $http;
access_log off;
map $http_authorization $token_user {
    "Bearer alice-laptop"  alice;
    "Bearer alice-phone"   alice;
    "Bearer bob-token"     bob;
    default                "";
}
server {
    listen unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock;
    access_log $TEST_NGINX_PREFIX/logs/auth.log;
    location = /check {
        if ($token_user = "") {
            return 401;
        }
        add_header X-User $token_user;
        return 200;
    }
}
AUTH
}

# Every location of the block's server behind the backend (a location
# that is not says "auth_request off"): auth_request, the user it names in
# $uid, and the location its subrequests go to, before the block's server
# config. (Subrequests skip the access phase: /_auth does not ask itself.)
sub behind_auth {
    my ($config) = @_;
    return <<'AUTH' . $config;
auth_request /_auth;
auth_request_set $uid $upstream_http_x_user;
location = /_auth {
    internal;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock:/check;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
}
AUTH
}

# How many checks the backends of the nginx ($env...) have answered so
# far.
sub auth_checks {
    my $n = 0;
    $n += () = read_file("$_->{prefix}/logs/auth.log") =~ /\n/g for @_;
    return $n;
}

# Waits until the backends' logs have $want lines (a line is written just
# after its answer, maybe by the other worker), then a moment more: true
# if they have exactly $want.
sub auth_checks_are {
    my ($want, @envs) = @_;
    ThrottleTest::Step::wait_until(1, sub { auth_checks(@envs) >= $want });
    sleep 0.1;
    return auth_checks(@envs) == $want;
}

# ---------------------------------------------------------------------------
# Redis

# The units Redis holds under $key, as the algorithm keeps them: gcra, the
# TAT's lead over Redis TIME in emission intervals of $unit_us (rounded
# up: the few milliseconds since the charge take nothing off a unit);
# fixed_window n, sliding_window c (this window's count), sliding_log the
# set's size. 0 when the key is not there.
sub units_held {
    my ($redis, $algorithm, $key, $unit_us) = @_;
    return $redis->cmd('ZCARD', $key) if $algorithm eq 'sliding_log';
    my %field = (fixed_window => 'n', sliding_window => 'c');
    return $redis->cmd('HGET', $key, $field{$algorithm}) // 0
        if $field{$algorithm};
    my $tat = $redis->cmd('GET', $key);
    return 0 unless defined $tat;
    return ceil(($tat - $redis->time_us) / $unit_us);
}

# ---------------------------------------------------------------------------
# Requests that wait: written now, read later (status_of and
# count_statuses come from t/lib/Responses.pm)

# Opens a connection to $env per request and writes each request ([uri,
# bearer token]) without reading; returns the sockets, for
# read_responses. The requests are all in nginx before any is answered.
sub send_requests {
    my ($env, @requests) = @_;
    my @socks;
    for my $req (@requests) {
        my ($uri, $token) = @$req;
        my $s = ThrottleTest::connect_to($env) or die "connect: $!";
        syswrite $s, "GET $uri HTTP/1.1\r\nHost: localhost\r\n"
                   . "Authorization: Bearer $token\r\nConnection: close\r\n\r\n";
        push @socks, $s;
    }
    return @socks;
}

# How many of the sockets of send_requests have something to read (a
# response, or the connection closed) right now.
sub answered_now {
    my @ready = IO::Select->new(@_)->can_read(0);
    return scalar @ready;
}

# The responses on the sockets of send_requests, in their order, each
# read as soon as it arrives, with {elapsed} from $t0 to its arrival.
sub read_responses {
    my ($t0, @socks) = @_;
    my %index = map { ("$socks[$_]" => $_) } 0 .. $#socks;
    my @res = map { { headers => {}, error => 'no response' } } @socks;
    my $pending = IO::Select->new(@socks);
    my $deadline = time + $Processes::TIMEOUT;
    while ($pending->count && time < $deadline) {
        for my $s ($pending->can_read($deadline - time)) {
            my $arrived = time - $t0;
            my $res = ThrottleTest::http_read($s, { method => 'GET' });
            $res->{elapsed} = $arrived;
            $res[ $index{"$s"} ] = $res;
            $pending->remove($s);
            close $s;
        }
    }
    return @res;
}

# ---------------------------------------------------------------------------
# Two nginx instances, one Redis, one strict zone of the authorized phase

sub two_nodes {
    my $redis = RedisServer->start;
    my %conf = (
        http_config => auth_backend(<<'HTTP'),
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $uid zone=u:1m rate=1r/m burst=9 redis=main;
HTTP
        config => behind_auth(<<'SERVER'),
location / {
    throttle zone=u phase=authorized;
}
SERVER
        redis_servers => [$redis],
    );

    my @logs = with_instances('two nodes', 2, \%conf,
                              sub { two_nodes_tests($redis, @_) });
    for my $i (0 .. $#logs) {
        unlike($logs[$i], qr/exited on signal|\[alert\]|\[crit\]|throttle redis/,
               'two nodes: node ' . ($i + 1) . ': no crash, alert, crit '
               . 'or Redis error in error.log');
    }
    $redis->stop;
}

sub two_nodes_tests {
    my ($redis, @nodes) = @_;
    my $T = 60e6;    # us per unit

    # 40 requests alternating between the nodes, each on its own
    # connection, alice's two tokens in turn: exactly 10 pass
    {
        my (%count, @admitted);
        for my $i (0 .. 39) {
            my $token = $i % 4 < 2 ? 'alice-laptop' : 'alice-phone';
            my $res = http_request($nodes[$i % 2], 'GET /a.txt',
                                   Authorization => "Bearer $token");
            $count{ status_of($res) }++;
            $admitted[$i % 2]++ if ($res->{status} // 0) == 200;
        }
        is_deeply(\%count, { 200 => 10, 429 => 30 },
                  'two nodes, alternating: 10 of 40 pass in total')
            or diag(explain \%count);
        ok($admitted[0] && $admitted[1], 'two nodes, alternating: both admitted some');
        is(units_held($redis, 'gcra', 'throttle:u:{alice}', $T), 10,
           'two nodes, alternating: Redis holds the 10 units');
        ok(auth_checks_are(40, @nodes),
           'two nodes, alternating: all 40 checked by the auth backends');
    }

    # 25 requests at each node, all written before any is read: 20 of
    # bob's and 5 with a token the backend refuses, interleaved
    {
        my $t0 = time;
        my @socks = map {
            send_requests($nodes[$_ % 2],
                          ['/a.txt', int($_ / 2) % 5 ? 'bob-token' : 'forged'])
        } 0 .. 49;
        my @res = read_responses($t0, @socks);
        is_deeply(count_statuses(@res), { 200 => 10, 429 => 30, 401 => 10 },
                  'two nodes, at once: 10 of bob\'s 40 pass, the 10 forged get 401')
            or diag(explain count_statuses(@res));
        is(units_held($redis, 'gcra', 'throttle:u:{bob}', $T), 10,
           'two nodes, at once: Redis holds the 10 units');
        # the 40 checks above (all logged by now), and these 50
        ok(auth_checks_are(90, @nodes),
           'two nodes, at once: all 50 checked by the auth backends');
    }

    is(join(' ', $redis->keys_matching('*')),
       'throttle:u:{alice} throttle:u:{bob}',
       'two nodes: one key per user in Redis, none for the forged tokens');
}

two_nodes();

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: strict, authorized: 3 of 5 per user whichever token, a refused token costs nothing; Redis holds what was admitted
--- redis
redis
--- http_config auth_backend
@redis_main
throttle_zone $uid zone=u:1m rate=1r/m burst=2 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
add_header X-User $uid always;
location / {
    throttle zone=u phase=authorized;
}
--- requests
GET /a.txt => 200
  > Authorization: Bearer alice-laptop
  X-User: alice
  X-Status: PASSED
  RateLimit-Policy: "u";q=3;w=180
  RateLimit: "u";r=2;t=60
  body: a
GET /a.txt => 200
  > Authorization: Bearer alice-phone
  RateLimit: "u";r=1;t=120
GET /a.txt => 200
  > Authorization: Bearer alice-laptop
  RateLimit: "u";r=0;t=180
GET /a.txt => 429
  > Authorization: Bearer alice-phone
  X-Status: REJECTED
  Retry-After: 60
  RateLimit: "u";r=0;t=180
GET /a.txt => 429
  > Authorization: Bearer alice-laptop
  X-Status: REJECTED
  Retry-After: {60-}
GET /a.txt => 200
  > Authorization: Bearer bob-token
  X-User: bob
  X-Status: PASSED
  RateLimit: "u";r=2;t=60
perl {
    $stash{calls} = $redis->script_calls;
    # (a check is logged just after its answer: waited for, not read at once)
    ok(main::auth_checks_are(6, $nginx),
       "$name: the 6 requests so far were checked by the auth backend");
}
GET /a.txt x3 => 401
  > Authorization: Bearer forged
  no X-User
  no RateLimit
  no Retry-After
GET /a.txt => 401
  no RateLimit
perl {
    is($redis->script_calls - $stash{calls}, 0,
       "$name: the 4 refused requests cost no EVALSHA");
    ok(main::auth_checks_are(10, $nginx),
       "$name: ... and were refused by the auth backend");
    is(join(' ', $redis->keys_matching('*')), 'throttle:u:{alice} throttle:u:{bob}',
       "$name: one key per user in Redis, nothing for the refused requests");
    is(main::units_held($redis, 'gcra', 'throttle:u:{alice}', 60e6), 3,
       "$name: alice's key holds the 3 units admitted");
    is(main::units_held($redis, 'gcra', 'throttle:u:{bob}', 60e6), 1,
       "$name: bob's key holds 1 unit");
    my $pttl = $redis->cmd('PTTL', 'throttle:u:{alice}');
    ok($pttl > 0 && $pttl <= 180_000, "$name: alice's key has a TTL ($pttl ms)");
}
--- error_log
~ \[error\] .*throttled by zone "u", retry after



=== TEST 2: strict, authorized, keyed by the address: requests the auth backend refuses are never counted, nor is their error page
--- redis
redis
--- http_config auth_backend
@redis_main
throttle_zone $remote_addr zone=client:1m rate=1r/m burst=9 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
error_page 401 /denied.txt;
location / {
    throttle zone=client phase=authorized;
}
location = /denied.txt {
    auth_request off;
    throttle zone=client phase=authorized;
}
--- user_files
>>> denied.txt
log in first
--- requests
perl: $stash{runs} = $redis->scripts_run;
GET /a.txt x3 => 200
  > Authorization: Bearer alice-laptop
  X-Status: PASSED
GET /a.txt x4 => 401
  > Authorization: Bearer forged
  body: log in first
  no RateLimit
GET /a.txt => 200
  > Authorization: Bearer bob-token
  RateLimit: "client";r=6;t=240
perl {
    is($redis->scripts_run - $stash{runs}, 4,
       "$name: one EVALSHA per request let in, none for the refused ones");
    is(main::units_held($redis, 'gcra', 'throttle:client:{127.0.0.1}', 60e6), 4,
       "$name: the address's key holds the 4 units let in");
}



=== TEST 3: strict, authorized, every algorithm: exactly burst+1 pass; Redis holds them
--- redis
redis
--- http_config auth_backend
@redis_main
throttle_zone $uid zone=gcra:1m rate=1r/m burst=2 redis=main;
throttle_zone $uid zone=fixed_window:1m rate=1r/d burst=2 algorithm=fixed_window redis=main;
throttle_zone $uid zone=sliding_window:1m rate=1r/d burst=2 algorithm=sliding_window redis=main;
throttle_zone $uid zone=sliding_log:1m rate=1r/d burst=2 algorithm=sliding_log redis=main;
--- config behind_auth
location /gcra/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=gcra phase=authorized;
}
location /fixed_window/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=fixed_window phase=authorized;
}
location /sliding_window/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=sliding_window phase=authorized;
}
location /sliding_log/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=sliding_log phase=authorized;
}
--- requests
perl {
    for my $algorithm (qw(gcra fixed_window sliding_window sliding_log)) {
        my @status = map {
            request("/$algorithm/a.txt", Authorization => 'Bearer bob-token')->{status}
                // 'none'
        } 1 .. 5;
        is("@status", '200 200 200 429 429', "$name: $algorithm: 3 of 5 pass");
        is(main::units_held($redis, $algorithm, "throttle:$algorithm:{bob}", 60e6),
           3, "$name: $algorithm: Redis holds the 3 units");
    }
}



=== TEST 4: async, authorized: decided at once by the zone (Redis stopped meanwhile), then the units reach Redis
--- redis
redis
--- http_config auth_backend
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=2s;
throttle_zone $uid zone=u:1m rate=1r/m burst=2 redis=main sync=async sync_interval=100ms;
--- config behind_auth
add_header X-Status $throttle_status always;
location / {
    throttle zone=u phase=authorized;
}
--- requests
# SIGSTOP for less than the timeout: a sync sent meanwhile is answered
# once Redis runs again, as a request of a strict zone would be
perl: $redis->pause;
GET /a.txt x3 => 200
  > Authorization: Bearer alice-phone
  X-Status: PASSED
  time < 0.4
GET /a.txt x2 => 429
  > Authorization: Bearer alice-laptop
  X-Status: REJECTED
  RateLimit: "u";r=0;t=180
  time < 0.4
GET /a.txt x2 => 401
  > Authorization: Bearer forged
  time < 0.4
perl {
    $redis->resume;
    my $key = RedisServer::async_key('throttle:', 'u', 'alice');
    ok(wait_until(2, sub { main::units_held($redis, 'gcra', $key, 60e6) == 3 }),
       "$name: alice's 3 units reach Redis");
    is(join(' ', $redis->keys_matching('*')), $key,
       "$name: alice's key is the only one in Redis");
}
--- no_error_log
cannot sync with Redis



=== TEST 5: a Redis that never answers: the request waits in the authorized phase, after the auth check, until the timeout; on_error allow or deny
--- redis
fake silent
--- http_config auth_backend
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s connect_timeout=100ms;
throttle_zone $uid zone=u:1m rate=1r/m burst=2 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=u phase=authorized;
}
location = /index.html {
    throttle zone=u phase=authorized;
    throttle_on_error deny;
    throttle_status 503;
}
--- requests
# refused by the access phase: no wait for Redis
GET /a.txt => 401
  > Authorization: Bearer forged
  time < 0.5
perl {
    my $res = request('/a.txt', Authorization => 'Bearer alice-laptop');
    is($res->{status}, 200, "$name: alice: 200");
    is(header($res, 'X-Status'), 'ERROR_ALLOWED', "$name: ... ERROR_ALLOWED");
    ok($res->{elapsed} >= 0.9 && $res->{elapsed} < 1.6,
       sprintf '%s: ... after the 1 s timeout (%.2f s)', $name, $res->{elapsed});
}
GET /index.html => 503
  > Authorization: Bearer alice-laptop
  X-Status: ERROR_DENIED
  no RateLimit
  time < 1.6
--- error_log
no reply within 1000 ms



=== TEST 6: requests waiting for a silent Redis block no worker: other requests on the same workers are answered meanwhile
--- redis
fake silent
--- http_config auth_backend
# 2 s: time enough for the other requests on a busy machine
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=2s connect_timeout=100ms;
throttle_zone $uid zone=u:1m rate=1r/m burst=9 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
add_header X-Pid $pid always;
location = /a.txt {
    throttle zone=u phase=authorized;
}
location = /b.txt {
    auth_request off;
}
--- requests
perl {
    my $t0 = time;
    my @socks = main::send_requests($nginx, (['/a.txt', 'alice-laptop']) x 10);
    # (rather than all_read(): /proc/net/tcp is slow to read on a busy
    # machine, by seconds, the timeout's time)
    ok(wait_until(2, sub { main::auth_checks($nginx) == 10 }),
       "$name: the 10 to the limited location are let in by the backend");
    # meanwhile, at once: 6 to an unlimited location, 4 to the limited one
    # that the backend refuses
    my @quick = (parallel_requests(6, 'GET /b.txt'),
                 parallel_requests(4, 'GET /a.txt', Authorization => 'Bearer forged'));
    my $quick_done = time - $t0;
    my $answered = main::answered_now(@socks);
    my @waited = main::read_responses($t0, @socks);

    is(join(' ', map { main::status_of($_) } @quick), join(' ', (200) x 6, (401) x 4),
       "$name: meanwhile: 6 to /b.txt (200), 4 forged (401)");
    my ($slowest) = sort { $b <=> $a } map { $_->{elapsed} } @quick;
    cmp_ok($slowest, '<', 0.5, "$name: ... each answered at once");
    is($answered, 0, sprintf '%s: ... all done %.2f s after the 10 were '
       . 'sent, none of which was answered yet', $name, $quick_done);

    is(join(' ', map { header($_, 'X-Status') // main::status_of($_) } @waited),
       join(' ', ('ERROR_ALLOWED') x 10), "$name: the 10 waiting: ERROR_ALLOWED");
    my ($first, $last) = (sort { $a <=> $b } map { $_->{elapsed} } @waited)[0, -1];
    ok($first >= 1.9 && $last < 3.5, sprintf '%s: ... answered after the 2 s '
       . 'timeout, not much later (%.2f to %.2f s)', $name, $first, $last);

    my %waiting_on = map { (header($_, 'X-Pid') // '') => 1 } @waited;
    my @shared = grep { $waiting_on{ header($_, 'X-Pid') // '' } } @quick;
    ok(scalar @shared, sprintf '%s: %d of the quick ones answered by a worker '
       . 'that had requests waiting', $name, scalar @shared);
}
GET /b.txt x10 => 200
--- distinct
X-Pid >= 2
--- error_log
no reply within 2000 ms



=== TEST 7: Redis stopped mid-test: on_error allow at once; decisions resume once it is back
--- redis
redis
--- http_config auth_backend
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s connect_timeout=100ms;
throttle_zone $uid zone=u:1m rate=1r/m burst=2 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
location / {
    throttle zone=u phase=authorized;
}
--- requests
GET /a.txt => 200
  > Authorization: Bearer alice-laptop
  X-Status: PASSED
  RateLimit: "u";r=2;t=60
perl: $redis->stop;
GET /a.txt x3 => 200
  > Authorization: Bearer alice-laptop
  X-Status: ERROR_ALLOWED
  no RateLimit
  time < 0.5
GET /a.txt => 401
  > Authorization: Bearer forged
# the new Redis starts empty; each worker reconnects on its own (one in
# its backoff answers at once, sending nothing): poll
perl: $redis->restart;
GET /a.txt => 200 poll 3
  > Authorization: Bearer alice-laptop
  X-Status: PASSED
  RateLimit: "u";r=2;t=60
GET /a.txt => 200 poll 3
  > Authorization: Bearer alice-laptop
  X-Status: PASSED
  RateLimit: "u";r=1;t=120
perl {
    is(main::units_held($redis, 'gcra', 'throttle:u:{alice}', 60e6), 2,
       "$name: the new Redis holds the 2 units admitted since");
}
--- error_log
~ \[error\] .*throttle redis "main"



=== TEST 8: a preaccess zone by client and an authorized zone by user: each phase charges Redis on its own
--- redis
redis
--- http_config auth_backend
@redis_main
throttle_zone $http_x_client zone=client:1m rate=1r/m burst=2 redis=main;
throttle_zone $uid zone=u:1m rate=1r/m burst=1 redis=main;
--- config behind_auth
add_header X-Status $throttle_status always;
location / {
    throttle zone=client;
    throttle zone=u phase=authorized;
}
--- requests
GET /a.txt x2 => 200
  > Authorization: Bearer alice-laptop
  > X-Client: c1
  X-Status: PASSED
perl {
    # (a check is logged just after its answer: waited for, not read at once)
    ok(main::auth_checks_are(2, $nginx),
       "$name: both were checked by the auth backend");
}
GET /a.txt => 429
  > Authorization: Bearer alice-laptop
  > X-Client: c1
  X-Status: REJECTED
  RateLimit: "u";r=0;t=120
perl {
    is(main::units_held($redis, 'gcra', 'throttle:client:{c1}', 60e6), 3,
       "$name: rejected by the user zone: already charged by the client zone (3 units)");
    is(main::units_held($redis, 'gcra', 'throttle:u:{alice}', 60e6), 2,
       "$name: ... the user zone holds the 2 it admitted");
    ok(main::auth_checks_are(3, $nginx),
       "$name: ... the request was checked by the auth backend");
}
GET /a.txt => 429
  > Authorization: Bearer bob-token
  > X-Client: c1
  X-Status: REJECTED
  RateLimit: "client";r=0;t=180
perl {
    ok(main::auth_checks_are(3, $nginx),
       "$name: rejected by the client zone: never reached the auth backend");
    is($redis->cmd('EXISTS', 'throttle:u:{bob}'), 0,
       "$name: ... nor the user zone's key");
}
GET /a.txt => 200
  > Authorization: Bearer bob-token
  > X-Client: c2
  X-Status: PASSED
perl {
    is(main::units_held($redis, 'gcra', 'throttle:u:{bob}', 60e6), 1,
       "$name: from another client bob is let in and charged");
}



=== TEST 9: try_files to a named location with the same authorized zone: one EVALSHA per request
--- redis
redis
--- http_config auth_backend
@redis_main
throttle_zone $uid zone=u:1m rate=1r/m burst=2 redis=main;
--- config behind_auth
location /files/ {
    throttle zone=u phase=authorized;
    try_files $uri @fallback;
}
location @fallback {
    throttle zone=u phase=authorized;
    try_files /a.txt =404;
}
--- requests
perl: $stash{runs} = $redis->scripts_run;
GET /files/missing.txt => 200
  > Authorization: Bearer alice-laptop
  RateLimit: "u";r=2;t=60
  body: a
GET /files/missing.txt => 200
  > Authorization: Bearer alice-laptop
  RateLimit: "u";r=1;t=120
GET /files/missing.txt => 200
  > Authorization: Bearer alice-laptop
  RateLimit: "u";r=0;t=180
perl {
    is($redis->scripts_run - $stash{runs}, 3, "$name: 3 requests, 3 EVALSHA");
    is(main::units_held($redis, 'gcra', 'throttle:u:{alice}', 60e6), 3,
       "$name: alice's key holds 3 units");
}
GET /files/missing.txt => 429
  > Authorization: Bearer alice-laptop



=== TEST 10: the authorized zone's Redis is down, the preaccess zone's is not: on_error decides the request, which the preaccess zone has charged
--- redis
redis
closed
--- http_config auth_backend
throttle_redis up server=127.0.0.1:$TEST_REDIS_PORT;
throttle_redis down server=127.0.0.1:$TEST_REDIS_PORT_2 timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_client zone=client:1m rate=1r/m burst=9 redis=up;
throttle_zone $uid zone=u:1m rate=1r/m burst=9 redis=down;
--- config behind_auth
add_header X-Status $throttle_status always;
location / {
    throttle zone=client;
    throttle zone=u phase=authorized;
}
location /strict/ {
    alias $TEST_NGINX_HTML_DIR/;
    throttle zone=client;
    throttle zone=u phase=authorized;
    throttle_on_error deny;
}
--- requests
GET /a.txt x2 => 200
  > Authorization: Bearer alice-laptop
  > X-Client: c1
  X-Status: ERROR_ALLOWED
GET /strict/a.txt x2 => 429
  > Authorization: Bearer alice-laptop
  > X-Client: c1
  X-Status: ERROR_DENIED
  no Retry-After
perl {
    is(main::units_held($redis, 'gcra', 'throttle:client:{c1}', 60e6), 4,
       "$name: the client zone charged all 4, the 2 denied in the authorized phase too");
}
--- error_log
~ \[error\] .*throttle redis "down"
