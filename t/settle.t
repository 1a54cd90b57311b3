# SPDX-License-Identifier: BSD-2-Clause
# settle=: a request is charged its cost= when it arrives (the reservation,
# decided as ever) and, when it ends, what its settle= value says it used.
# Local zones, then strict ones on a real redis-server (their settle is a
# script sent when the request ends); docs/settle.md has the rules.
#
# Every block has real upstreams: servers of the same nginx on unix
# sockets in the block's prefix. The "LLM" answers 200 with X-Tokens-Used
# taken from the request's ?used= (so each request's usage is known); the
# "auth" backend answers 401 unless ?pass=right. The server under test
# logs "$throttle_settled $status" to settled.log; the steps wait for its
# lines, so that a settle is done before the next request is decided.

use strict;
use warnings;

use RedisServer;
use Responses ();
use Test::More;
use ThrottleTest;

package ThrottleTest::Step;

use SettleChecks qw(settled_lines_are settles_are);

package main;

use SettleChecks qw(settle_in_flight);

require_redis_module();

# Two nginx of 2 workers each, strict, on one Redis: 40 requests of a key
# alternate between them, each reserving 1 and settling a random 0..20
# (X-Used: the value needs no upstream here). Once every settle is
# answered, Redis holds exactly their sum: at 1r/h nothing drains
# meanwhile, so a look (cost=0) sees 1000 - sum left.
sub two_nodes_strict {
    my $redis = RedisServer->start;
    my $port = $redis->port;
    my %conf = (
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_api_key zone=tokens:1m rate=1r/h burst=999 redis=main;
HTTP
        config => <<'SERVER',
location = /a.txt {
    throttle zone=tokens settle=$http_x_used;
}
location = /b.txt {
    throttle zone=tokens cost=0;
}
location = /metrics {
    throttle_metrics;
}
SERVER
    );
    my $name = 'strict, two nginx';
    with_instances($name, 2, \%conf, sub {
        my @nodes = @_;
        my ($sum, $passed) = (0, 0);
        srand(25);
        for my $i (0 .. 39) {
            my $used = int(rand(21));
            my $r = ThrottleTest::Http::http_request(
                $nodes[$i % 2], 'GET /a.txt', 'X-Api-Key' => 'k',
                'X-Used' => $used);
            $passed++ if ($r->{status} // 0) == 200;
            $sum += $used;
        }
        is($passed, 40, "$name: the 40 requests pass");
        my $answered = sub {
            my $n = 0;
            for my $node (@nodes) {
                local $ThrottleTest::Step::CURRENT = $node;
                my $m = ThrottleTest::Step::metrics();
                $n += $m->{"nginx_throttle_settles_total{zone=\"tokens\",result=\"$_\"}"}
                    // 0 for qw(charged refunded even);
            }
            return $n;
        };
        Processes::wait_until($Processes::TIMEOUT, sub { $answered->() == 40 });
        is($answered->(), 40, "$name: every settle answered");
        my $look = ThrottleTest::Http::http_request(
            $nodes[0], 'GET /b.txt', 'X-Api-Key' => 'k');
        like(Responses::hdr($look, 'RateLimit') // '',
             qr/^"tokens";r=\Q@{[1000 - $sum]}\E;/,
             "$name: Redis holds the $sum units settled, 1000 - $sum left");
    });
    $redis->stop;
}

two_nodes_strict();

# A settle on its way when nginx is told to quit is delivered before the
# worker goes: nginx gets QUIT while the settle script waits in a paused
# Redis, and its worker exits only once the script has run.
settle_in_flight('strict, QUIT with a settle on its way',
                 sub { stop_instance($_[0]) });

run_blocks();

__DATA__

Every block's http{} has the upstreams (@upstreams); the token blocks
limit /v1/ with zone "tokens" (@tokens_location), the login blocks /login
with zone "logins" (@login_location). Each block shows its zone line.

--- @upstreams
log_format settled '$throttle_settled $status';

server {
    listen unix:$TEST_NGINX_PREFIX/llm-$TEST_NGINX_PORT.sock;
    access_log off;
    location / {
        add_header X-Tokens-Used $arg_used;
        return 200 "ok\n";
    }
}

server {
    listen unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock;
    access_log off;
    location / {
        if ($arg_pass = right) {
            return 200 "welcome\n";
        }
        return 401;
    }
}

--- @tokens_location
location /v1/ {
    throttle zone=tokens settle=$upstream_http_x_tokens_used;
    access_log $TEST_NGINX_PREFIX/logs/settled.log settled;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/llm-$TEST_NGINX_PORT.sock:/;
}

--- @metrics_location
location = /metrics {
    throttle_metrics;
}

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

--- @login_location
location = /login {
    throttle zone=logins settle=$failed;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock:/check;
}

--- @failed_logins
map $status $failed {
    ~^40[13]$  1;
    default    0;
}

=== TEST 1: tokens: reserve 1, charge what the upstream used; the key fills with the real usage
--- http_config
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
--- config
@tokens_location
--- requests
# 1 reserved of 10, then 3 more charged: 4 used
GET /v1/chat?used=4 => 200
  > X-Api-Key: a
  RateLimit-Policy: "tokens";q=10;w=600
  RateLimit: "tokens";r=9;t={60-}
perl: settled_lines_are($name, '4 200')
# 4 used + 1 reserved: 5 left; then the 1 is given back
GET /v1/chat?used=0 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=5;t={300-}
perl: settled_lines_are($name, '4 200', '0 200')
# 4 used + 1 reserved, then 5 more: 10 used, the key is full
GET /v1/chat?used=6 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=5;t={300-}
perl: settled_lines_are($name, '4 200', '0 200', '6 200')
GET /v1/chat?used=1 => 429
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={600-}
  Retry-After: {60-}
# a refused request settles nothing
perl: settled_lines_are($name, '4 200', '0 200', '6 200', '- 429')
# another key is untouched
GET /v1/chat?used=1 => 200
  > X-Api-Key: b
  RateLimit: "tokens";r=9;t={60-}
--- no_error_log
settle value



=== TEST 2: an overdraft is charged: later requests wait until the debt has drained
--- http_config
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
--- config
@tokens_location
--- requests
GET /v1/chat?used=25 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=9;t={60-}
perl: settled_lines_are($name, '25 200')
# 25 units of 1 minute each: 15 beyond the key's 10, and one more minute
# for a unit of room
GET /v1/chat?used=1 => 429
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={1500-}
  Retry-After: {960-}



=== TEST 3: logins: failures are charged, successes are free; 5 failures lock the account
--- http_config
@upstreams
@failed_logins
throttle_zone $arg_user zone=logins:1m rate=1r/m burst=4;
--- config
@login_location
--- requests
# on one connection, each request's settle is done before the next one
keepalive {
GET /login?user=bob&pass=wrong x3 => 401
GET /login?user=bob&pass=right x10 => 200
  RateLimit ~ ^"logins";r=1;
GET /login?user=bob&pass=wrong x2 => 401
GET /login?user=bob&pass=wrong => 429
GET /login?user=bob&pass=right => 429
  Retry-After: {60-}
}
# another user is not locked
GET /login?user=amy&pass=right => 200
  RateLimit ~ ^"logins";r=4;



=== TEST 4: logins: 20 wrong attempts at once cannot slip past the limit
--- http_config
@upstreams
@failed_logins
throttle_zone $arg_user zone=logins:1m rate=1r/m burst=4;
--- config
@login_location
--- requests
parallel 20 /login?user=eve&pass=wrong => 401 x5, 429 x15
GET /login?user=eve&pass=right => 429



=== TEST 5: a streamed (chunked) answer, and a client that goes away mid-answer, still settle
--- http_config
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;

server {
    listen unix:$TEST_NGINX_PREFIX/stream-$TEST_NGINX_PORT.sock;
    access_log off;
    root $TEST_NGINX_PREFIX/html;
    # gzip has no length to announce: the answer is chunked
    gzip on;
    gzip_types text/plain;
    gzip_min_length 0;
    location / {
        add_header X-Tokens-Used $arg_used;
    }
    location = /big.txt {
        add_header X-Tokens-Used $arg_used;
        limit_rate 256k;
        gzip off;
    }
}
--- config
location /v1/ {
    throttle zone=tokens settle=$upstream_http_x_tokens_used;
    access_log $TEST_NGINX_PREFIX/logs/settled.log settled;
    proxy_http_version 1.1;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/stream-$TEST_NGINX_PORT.sock:/;
}
--- requests
GET /v1/a.txt?used=3 => 200
  > X-Api-Key: a
  > Accept-Encoding: gzip
  Transfer-Encoding: chunked
  Content-Encoding: gzip
  RateLimit: "tokens";r=9;t={60-}
perl: settled_lines_are($name, '3 200')
perl {
    # 4 MB at 256 KB/s: the client reads the head and leaves
    my $prefix = $ThrottleTest::Step::CURRENT->{prefix};
    open my $fh, '>', "$prefix/html/big.txt" or die "big.txt: $!";
    print $fh 'x' x (4 << 20);
    close $fh;
    my $c = ThrottleTest::Http::connect_to($ThrottleTest::Step::CURRENT);
    print $c "GET /v1/big.txt?used=4 HTTP/1.1\r\nHost: localhost\r\n"
           . "X-Api-Key: a\r\n\r\n";
    my $head = '';
    while ($head !~ /\r\n\r\n/ && sysread($c, my $buf, 4096)) {
        $head .= $buf;
    }
    Test::More::like($head, qr{^HTTP/1\.1 200 }, "$name: the big answer begins");
    close $c;
    settled_lines_are($name, '3 200', '4 200');
}
# 3 + 4 used, then 1 reserved
GET /v1/a.txt?used=1 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=2;t={480-}



=== TEST 6: bad settle values: the reservation stands, one log line a second, each counted
--- http_config
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
--- config
location /v1/ {
    throttle zone=tokens cost=2 settle=$arg_s;
    access_log $TEST_NGINX_PREFIX/logs/settled.log settled;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/llm-$TEST_NGINX_PORT.sock:/;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /v1/chat?s=abc => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=8;t={120-}
GET /v1/chat?s= => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=6;t={240-}
GET /v1/chat?s=-1 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=4;t={360-}
GET /v1/chat?s=1000000001 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=2;t={480-}
GET /v1/chat?s=0 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={600-}
perl {
    settled_lines_are($name, '- 200', '- 200', '- 200', '- 200', '0 200');
    my $m = metrics();
    my %want = (invalid => 4, refunded => 1, charged => 0, even => 0,
                lost => 0);
    for my $result (sort keys %want) {
        Test::More::is(
            $m->{"nginx_throttle_settles_total{zone=\"tokens\",result=\"$result\"}"},
            $want{$result}, "$name: settles $result");
    }
}
# the last request gave its 2 back
GET /v1/chat?s=2 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={600-}
--- error_log
settle value "abc" for zone "tokens" is not a non-negative integer; the request keeps the cost it was charged



=== TEST 7: settle= needs a value
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/s;
--- config
location / {
    throttle zone=z settle=;
}
--- must_die
invalid parameter "settle=" in "throttle": it needs the units a request used



=== TEST 8: settle= in an async zone is refused, for now
--- http_config
throttle_redis main server=127.0.0.1:1;
throttle_zone $http_x_key zone=z:1m rate=1r/s redis=main sync=async;
--- config
location / {
    throttle zone=z settle=$upstream_http_x_used;
}
--- must_die
invalid parameter "settle=$upstream_http_x_used" in "throttle" directive
zone "z" is a sync=async zone



=== TEST 9: strict: tokens reserved, then charged or given back by a script at Redis's clock
--- redis
redis
--- http_config
@redis_main
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
--- config
@tokens_location
@metrics_location
--- requests
GET /v1/chat?used=4 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=9;t={60-}
perl: settles_are($name, charged => 1)
GET /v1/chat?used=0 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=5;t={300-}
perl: settles_are($name, charged => 1, refunded => 1)
GET /v1/chat?used=6 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=5;t={300-}
perl: settles_are($name, charged => 2, refunded => 1)
GET /v1/chat?used=1 => 429
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={600-}
  Retry-After: {60-}
perl: settled_lines_are($name, '4 200', '0 200', '6 200', '- 429')
--- no_error_log
throttle redis



=== TEST 10: strict: an overdraft in Redis; Retry-After accounts for it
--- redis
redis
--- http_config
@redis_main
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
--- config
@tokens_location
@metrics_location
--- requests
GET /v1/chat?used=25 => 200
  > X-Api-Key: a
  RateLimit: "tokens";r=9;t={60-}
perl: settles_are($name, charged => 1)
GET /v1/chat?used=1 => 429
  > X-Api-Key: a
  RateLimit: "tokens";r=0;t={1500-}
  Retry-After: {960-}



=== TEST 11: strict logins: 20 wrong attempts at once, 5 reach the backend; a success is free
--- redis
redis
--- http_config
@redis_main
@upstreams
@failed_logins
throttle_zone $arg_user zone=logins:1m rate=1r/m burst=4 redis=main;
--- config
@login_location
--- requests
GET /login?user=bob&pass=right x3 => 200
parallel 20 /login?user=eve&pass=wrong => 401 x5, 429 x15
GET /login?user=eve&pass=right => 429
# bob's successes left him his whole allowance: four more failures pass
GET /login?user=bob&pass=wrong x4 => 401



=== TEST 12: strict: Redis gone when the request ends: the settle is lost, counted and logged
--- redis
redis
--- http_config
@redis_main
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
--- config
@tokens_location
@metrics_location
--- requests
GET /v1/chat?used=4 => 200
  > X-Api-Key: a
perl: settles_are($name, charged => 1)
perl: $ThrottleTest::Step::CURRENT->{redis}[0]->stop
GET /v1/chat?used=4 => 200
  > X-Api-Key: a
  no RateLimit
perl: settles_are($name, charged => 1, lost => 1)
--- error_log
throttle redis "main"
