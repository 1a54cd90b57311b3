# SPDX-License-Identifier: BSD-2-Clause
# Strict mode and nginx's request flow: a request waiting for Redis is
# counted once through internal redirects (index, error_page, try_files,
# X-Accel-Redirect), subrequests are not limited, an HTTP keep-alive
# connection carries several decided requests, and several strict zones
# give the largest Retry-After. The same cases as redirect.t, with redis=.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: index redirect (/dir/ -> /dir/index.html) counts once (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /dir/ => 200
  RateLimit: "z";r=1;t=60
  body: dir index
GET /dir/ => 200
  RateLimit: "z";r=0;t=120
  body: dir index
GET /dir/ => 429
  Retry-After: 60



=== TEST 2: error_page 404 /index.html counts once (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location / {
    throttle zone=z;
    error_page 404 /index.html;
}
--- requests
GET /missing.txt => 404
  RateLimit: "z";r=1;t=60
  body: index page
GET /missing.txt => 404
  RateLimit: "z";r=0;t=120
  body: index page
GET /missing.txt => 429
  Retry-After: 60



=== TEST 3: try_files to a named location limited by the same zone counts once (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location /t/ {
    throttle zone=z;
    try_files $uri @fallback;
}
location @fallback {
    throttle zone=z;
    try_files /b.txt =404;
}
--- requests
GET /t/nothing => 200
  RateLimit: "z";r=1;t=60
  body: b
GET /t/nothing => 200
  RateLimit: "z";r=0;t=120
  body: b
GET /t/nothing => 429



=== TEST 4: error_page 429 to a location limited by the same zone: the custom page, once (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=0 redis=main;
--- user_files
>>> errors/429.html
slow down
--- config
throttle zone=z;
error_page 429 /errors/429.html;
location / {
}
--- requests
GET /a.txt => 200
GET /a.txt x2 => 429
  Retry-After: 60
  RateLimit: "z";r=0;t=60
  body: slow down
--- no_error_log
rewrite or internal redirection cycle



=== TEST 5: subrequests (SSI includes) are not limited and not charged (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=0 redis=main;
--- user_files
>>> page.html
[<!--# include virtual="/lim/a.txt" -->|<!--# include virtual="/lim/a.txt" -->]
>>> lim/a.txt
sub
--- config
location = /page.html {
    ssi on;
}
location /lim/ {
    throttle zone=z;
}
--- requests
GET /page.html x3 => 200
  no RateLimit
  body ~ ^\[sub\n\|sub\n\]$
GET /lim/a.txt => 200
  RateLimit: "z";r=0;t=60
GET /lim/a.txt => 429



=== TEST 6: X-Accel-Redirect from an upstream to a limited location counts once (strict)
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location /front/ {
    throttle zone=z;
    proxy_pass http://127.0.0.1:$TEST_NGINX_PORT/backend/;
}
# the upstream: this same server, not limited
location /backend/ {
    add_header X-Accel-Redirect /internal/a.txt;
    return 200 "backend\n";
}
location /internal/ {
    internal;
    throttle zone=z;
    alias $TEST_NGINX_HTML_DIR/;
}
--- requests
GET /front/x => 200
  RateLimit: "z";r=1;t=60
  body: a
GET /front/x => 200
  RateLimit: "z";r=0;t=120
  body: a
GET /front/x => 429
  Retry-After: 60



=== TEST 7: each counted request is one EVALSHA, redirects included
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=9 redis=main;
--- config
location / {
    throttle zone=z;
    error_page 404 /index.html;
}
--- requests
GET /dir/ => 200
  body: dir index
GET /missing.txt => 404
  body: index page
GET /a.txt => 200
perl {
    is($redis->scripts_run, 3,
       "$name: three requests, three scripts run");
}



=== TEST 8: an HTTP keep-alive connection: each request decided by Redis in turn
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=2 redis=main;
--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
}
--- requests
keepalive {
GET /a.txt => 200
  RateLimit: "z";r=2;t=60
  body: a
GET /b.txt => 200
  RateLimit: "z";r=1;t=120
  body: b
GET /a.txt => 200
  RateLimit: "z";r=0;t=180
GET /a.txt => 429
  X-Status: REJECTED
GET /a.txt => 429
  X-Status: REJECTED
}



=== TEST 9: several strict zones reject: Retry-After is the largest, the binding zone's fields
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=minute:1m rate=1r/m burst=0 redis=main;
throttle_zone k zone=hour:1m rate=1r/h burst=0 redis=main;
--- config
location / {
    throttle zone=minute;
    throttle zone=hour;
}
--- requests
GET /a.txt => 200
GET /a.txt => 429
  Retry-After: {3600-}
  RateLimit-Policy: "hour";q=1;w=3600
# and again, from the denial caches
GET /a.txt => 429
  Retry-After: {3600-}
  RateLimit-Policy: "hour";q=1;w=3600



=== TEST 10: a cost variable that is not a number: on_error, no round trip
--- redis
redis
--- http_config
@redis_main
throttle_zone k zone=z:1m rate=1r/m burst=9 redis=main;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    add_header X-Status $throttle_status always;
}
location /deny/ {
    throttle zone=z cost=$arg_cost;
    throttle_on_error deny;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=abc => 200
  X-Status: ERROR_ALLOWED
GET /deny/x?cost=-1 => 429
  X-Status: ERROR_DENIED
GET /a.txt?cost=2 => 200
  X-Status: PASSED
  RateLimit: "z";r=8;t=120
perl {
    is($redis->scripts_run, 1, "$name: only the valid cost reached Redis");
}



=== TEST 11: a long key (4000 bytes) is limited by Redis under a short name with a TTL
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location / {
    throttle zone=z;
}
--- requests eval
my $k = 'x' x 4000;
my $k2 = 'x' x 3999 . 'y';
"GET /a.txt => 200\n  > X-Key: $k\n"
. "GET /a.txt => 429\n  > X-Key: $k\n"
. "GET /a.txt => 200\n  > X-Key: $k2\n"
. "perl {\n"
. "    my \@keys = \$redis->keys_matching('throttle:z:*');\n"
. "    is(scalar \@keys, 2, \"\$name: two keys\");\n"
. "    cmp_ok(length(\$_), '<', 200, \"\$name: a short name\") for \@keys;\n"
. "    cmp_ok(\$redis->cmd('PTTL', \$_), '>', 0, \"\$name: with a TTL\") for \@keys;\n"
. "}\n"



=== TEST 12: a day-long policy (1r/d, burst 26000: T x (burst+1) near 2^51 us) is exact through Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=26000 redis=main;
--- config
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z cost=26000;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit-Policy: "z";q=26001;w=2246486400
  RateLimit: "z";r=26000;t=86400
GET /b.txt => 200
  > X-Key: k
  RateLimit ~ ^"z";r=0;t=224648640\d$
GET /a.txt => 429
  > X-Key: k
  Retry-After: {86400-}
perl {
    my $tat = $redis->cmd('GET', 'throttle:z:{k}');
    my $ahead = $tat - $redis->time_us;
    ok($ahead > 2246486400e6 - 5e6 && $ahead <= 2246486400e6,
       "$name: the TAT is 26001 days ahead, to the microsecond range")
        or diag("ahead by $ahead us");
}



=== TEST 13: the denial cache is per cost: a smaller cost that fits still passes, cost 0 still reports
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=4 redis=main;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=3 => 200
  > X-Key: k
  RateLimit: "z";r=2;t=180
# 3 more do not fit (2 left): Redis rejects, the zone caches it
GET /a.txt?cost=3 => 429
  > X-Key: k
  Retry-After: 60
# 1 fits
GET /a.txt?cost=1 => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t={240-}
# 0 always fits
GET /a.txt?cost=0 => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t={240-}
GET /a.txt?cost=1 => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=0;t={300-}
GET /a.txt?cost=1 => 429
  > X-Key: k
  X-Status: REJECTED



=== TEST 14: pipelined decisions come back to the right requests
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT keepalive=1;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=49 redis=main;
--- config
location / {
    throttle zone=z;
    add_header X-Key $http_x_key always;
}
--- requests
perl {
    # key kN holds N units spent: its next request leaves 50 - N - 1
    my $now = $redis->time_us;
    for my $n (0 .. 39) {
        next unless $n;
        $redis->cmd('SET', "throttle:z:{k$n}", $now + $n * 60e6,
                    'PX', $n * 60_000);
    }
    my @socks;
    for my $n (0 .. 39) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
            PeerPort => $nginx->{port}, Proto => 'tcp', Timeout => 2)
            or die "connect: $!";
        push @socks, [$n, $s];
    }
    syswrite $_->[1], "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Key: k$_->[0]\r\n"
                    . "Connection: close\r\n\r\n" for @socks;
    my $bad = 0;
    for (@socks) {
        my ($n, $s) = @$_;
        my $res = ThrottleTest::http_read($s, { method => 'GET' });
        close $s;
        my $want = 49 - $n;
        my ($r) = (header($res, 'RateLimit') // '') =~ /;r=(\d+);/;
        unless (($res->{status} // 0) == 200 && defined $r && $r == $want
                && (header($res, 'X-Key') // '') eq "k$n") {
            $bad++;
            diag("k$n: status " . ($res->{status} // 'none') . ", RateLimit "
                 . (header($res, 'RateLimit') // 'none') . ", want r=$want");
        }
    }
    is($bad, 0, "$name: 40 concurrent requests, each got its own key's answer");
}



=== TEST 15: on_error deny in a location with two strict zones, one backend down: the other zone is not charged
--- redis
redis
closed
--- http_config
throttle_redis up server=127.0.0.1:$TEST_REDIS_PORT;
throttle_redis down server=127.0.0.1:$TEST_REDIS_PORT_2 timeout=100ms connect_timeout=100ms;
throttle_zone k zone=good:1m rate=1r/m burst=9 redis=up;
throttle_zone k zone=bad:1m rate=1r/m burst=9 redis=down;
--- config
location = /a.txt {
    throttle zone=good;
    throttle zone=bad;
    throttle_on_error deny;
    add_header X-Status $throttle_status always;
}
location = /b.txt {
    throttle zone=good;
}
--- requests
GET /a.txt x3 => 429
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    # a refund is sent, not waited for: the next request may reach Redis
    # first (another connection, another worker); wait for the refunds
    ok(wait_until(3, sub {
           ($redis->cmd('GET', 'throttle:good:{k}') // 0) <= $redis->time_us }),
       "$name: good's three charges given back");
}
GET /b.txt => 200
  RateLimit: "good";r=9;t=60
perl {
    my $tat = $redis->cmd('GET', 'throttle:good:{k}') // 0;
    my $ahead = $tat - $redis->time_us;
    ok($ahead <= 60e6, "$name: good's key holds one unit, not four")
        or diag(sprintf 'ahead by %.1f s', $ahead / 1e6);
}
