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

use Clock ();
use RedisServer;
use Responses ();
use Test::More;
use ThrottleTest;

package ThrottleTest::Step;

use SettleChecks qw(settled_lines_are settles_are);

package main;

use SettleChecks qw(settle_in_flight);

require_redis_module();

# Two nginx of 2 workers each on one Redis: 24 requests of a key alternate
# between them, each reserving 10 and settling a random 0..60 (X-Used: the
# value needs no upstream here), one at a time: the next goes once this
# one's settle is counted (strict: answered by Redis) and, async, once
# both nginx have synced twice (300 ms at sync_interval=100ms). At 1r/d
# (a unit drains in 86.4 s) nothing drains meanwhile: the limit is 600
# units, and the sum settled passes it, so the last requests see the debt.
# The window counters (async) count 600r/h in the hour.
#  - strict: admissions are exactly the model's (a request passes while
#    the units settled so far and its 10 fit in 600);
#  - async: an nginx decides from its view, which misses at most what the
#    other admitted since it last synced the key: here the other's last
#    request. So a request the model admits passes, and one passes only if
#    it would fit without that last request (docs/modes.md's bound, as
#    this pacing makes it).
# Either way Redis holds, at its clock, exactly the units settled by the
# requests that passed, and a 429's Retry-After waits for the debt.
sub two_nodes {
    my ($mode, $algorithm) = @_;
    my $redis = RedisServer->start;
    my $port = $redis->port;
    my $sync = $mode eq 'async' ? ' sync=async sync_interval=100ms' : '';
    my $gcra = $algorithm eq 'gcra';
    my $limit = $gcra ? 'rate=1r/d burst=599' : "rate=600r/h algorithm=$algorithm";
    Clock::hour_guard(60) unless $gcra;
    my %conf = (
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_api_key zone=tokens:1m $limit redis=main$sync;
HTTP
        config => <<'SERVER',
location = /a.txt {
    throttle zone=tokens cost=10 settle=$http_x_used;
}
location = /metrics {
    throttle_metrics;
}
SERVER
    );
    my $name = "$mode $algorithm, two nginx";
    with_instances($name, 2, \%conf, sub {
        my @nodes = @_;
        my ($sum, $counted, $retry) = (0, 0, undef);
        my (@got, @exact, @loose);
        my @last = (0, 0);    # what each nginx's last admitted request settled
        srand(25);
        for my $i (0 .. 23) {
            my $used = int(rand(61));
            my $node = $i % 2;
            push @exact, $sum + 10 <= 600 ? 200 : 429;
            push @loose, $sum - $last[1 - $node] + 10 <= 600 ? 200 : 429;
            my $r = ThrottleTest::Http::http_request(
                $nodes[$node], 'GET /a.txt', 'X-Api-Key' => 'k',
                'X-Used' => $used);
            my $status = $r->{status} // 0;
            push @got, $status;
            if ($status == 200) {
                $sum += $used;
                $last[$node] = $used;
                $counted++;
                Processes::wait_until($Processes::TIMEOUT,
                                      sub { settles_counted(@nodes) == $counted });
                select(undef, undef, undef, 0.3) if $mode eq 'async';
            } else {
                $retry //= { sum => $sum, unseen => $last[1 - $node],
                             after => Responses::hdr($r, 'Retry-After') };
            }
        }
        is(settles_counted(@nodes), $counted, "$name: every settle counted");
        if ($mode eq 'strict') {
            is("@got", "@exact", "$name: admissions are the model's");
        } else {
            my @wrong = grep {
                ($exact[$_] == 200 && $got[$_] != 200)
                    || ($got[$_] == 200 && $loose[$_] != 200)
            } 0 .. $#got;
            is("@wrong", '', "$name: admissions within the bound "
                             . "(got @got; exact @exact)");
        }
        ok(defined $retry, "$name: the debt turns requests away");
        if ($retry && $gcra) {
            # a request of 10 waits until sum + 10 - 600 units drained
            # (async: of the sum its nginx sees, which may miss the other's
            # last request); 90 s for what drained and the rounding
            my $want_s = ($retry->{sum} + 10 - 600) * 86_400;
            my $least_s = $mode eq 'async'
                ? $want_s - $retry->{unseen} * 86_400 : $want_s;
            my $after = $retry->{after} // 0;
            ok($after >= $least_s - 90 && $after <= $want_s + 90,
               "$name: Retry-After $after s waits for the debt "
               . "($least_s to $want_s s)");
        }
        my ($key) = $redis->keys_matching('*');
        my $held = $gcra ? SettleChecks::redis_units($redis, 86_400e6)
                 : $redis->cmd('HGET', $key, $algorithm eq 'fixed_window' ? 'n' : 'c');
        is($held, $sum, "$name: Redis holds the $sum units settled");
    });
    $redis->stop;
}

# The settles the nginx have counted, Redis's answers included.
sub settles_counted {
    my $n = 0;
    for my $node (@_) {
        local $ThrottleTest::Step::CURRENT = $node;
        my $m = ThrottleTest::Step::metrics();
        $n += $m->{"nginx_throttle_settles_total{zone=\"tokens\",result=\"$_\"}"}
            // 0 for qw(charged refunded even);
    }
    return $n;
}

two_nodes('strict', 'gcra');
# (fixed_window's negative counts: async_refund_after_a_sync below)
two_nodes('async', $_) for qw(gcra sliding_window);

# Async: a request that outlasts the syncs has its reservation in Redis
# before it ends; its refund then goes as units given back (negative), and
# Redis ends with just what it used. The answer is slowed by limit_rate.
sub async_refund_after_a_sync {
    my ($algorithm) = @_;
    my $redis = RedisServer->start;
    my $port = $redis->port;
    my $gcra = $algorithm eq 'gcra';
    my $limit = $gcra ? 'rate=1r/d burst=999' : "rate=1000r/h algorithm=$algorithm";
    Clock::hour_guard(30) unless $gcra;
    my $name = "async $algorithm, a refund after the reservation synced";
    my $env = start_instance(
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_api_key zone=tokens:1m $limit redis=main sync=async sync_interval=100ms;
HTTP
        config => <<'SERVER');
location = /big.txt {
    throttle zone=tokens cost=10 settle=$http_x_used;
    limit_rate 256k;
}
SERVER
    open my $fh, '>', "$env->{prefix}/html/big.txt" or die "big.txt: $!";
    print $fh 'x' x (512 << 10);
    close $fh;
    my $held = sub {
        my ($key) = $redis->keys_matching('*');
        return 0 unless defined $key;
        return $gcra ? SettleChecks::redis_units($redis, 86_400e6)
             : $redis->cmd('HGET', $key, $algorithm eq 'fixed_window' ? 'n' : 'c') // 0;
    };

    my $c = ThrottleTest::connect_to($env);
    print $c "GET /big.txt HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: k\r\n"
           . "X-Used: 3\r\nConnection: close\r\n\r\n";
    my $got = '';
    while ($got !~ /\r\n\r\n/ && sysread($c, my $buf, 4096)) {
        $got .= $buf;
    }
    like($got, qr{^HTTP/1\.1 200 }, "$name: admitted");
    Processes::wait_until(1, sub { $held->() == 10 });
    is($held->(), 10, "$name: the reservation reached Redis first");
    1 while sysread($c, my $buf, 65536);    # the answer ends: 7 come back
    close $c;
    Processes::wait_until(2, sub { $held->() == 3 });
    is($held->(), 3, "$name: Redis holds the 3 units used");
    unlike(stop_instance($env), qr/\[(alert|crit|error)\]/,
           "$name: nothing went wrong");
    $redis->stop;
}

async_refund_after_a_sync($_) for qw(gcra fixed_window sliding_window);

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



=== TEST 8: async: the settle shows at once here, and reaches Redis with the next sync
--- redis
redis
--- http_config
@redis_main
@upstreams
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main sync=async;
--- config
@tokens_location
@metrics_location
--- requests
GET /v1/chat?used=7 => 200
  > X-Api-Key: b
  RateLimit: "tokens";r=9;t={60-}
perl: settles_are($name, charged => 1)
# 7 used + 1 reserved: 2 left, at once; then 1 more charged
GET /v1/chat?used=2 => 200
  > X-Api-Key: b
  RateLimit: "tokens";r=2;t={480-}
perl: settles_are($name, charged => 2)
# the 9 units settled are in Redis: 9 minutes ahead of its clock
perl: ok(SettleChecks::redis_units_are($ThrottleTest::Step::CURRENT->{redis}[0], 60e6, 9), "$name: Redis holds the 9 units settled")
--- no_error_log
throttle redis



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
