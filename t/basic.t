# SPDX-License-Identifier: BSD-2-Clause
# The funnel at work: burst, 429, exact headers, cost, empty keys, status,
# variables, log levels, inheritance, rate units.
#
# Rates are slow (30r/m and slower) so that the few milliseconds a block
# takes never change an expected value.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: a fresh key admits burst+1 requests, the next gets 429 with exact headers
--- http_config
throttle_zone $http_x_key zone=reply:1m rate=30r/m burst=15;
--- config
location / {
    throttle zone=reply;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "reply";q=16;w=32
  RateLimit: "reply";r=15;t=2
  no Retry-After
  body: a
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "reply";q=16;w=32
  RateLimit: "reply";r=14;t=4
  no Retry-After
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=13;t=6
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=12;t=8
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=11;t=10
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=10;t=12
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=9;t=14
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=8;t=16
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=7;t=18
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=6;t=20
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=5;t=22
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=4;t=24
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=3;t=26
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=2;t=28
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "reply";r=1;t=30
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "reply";q=16;w=32
  RateLimit: "reply";r=0;t=32
  no Retry-After
GET /a.txt => 429
  > X-Key: alice
  Retry-After: 2
  RateLimit-Policy: "reply";q=16;w=32
  RateLimit: "reply";r=0;t=32
# a rejection stores nothing: the next one sees the same state
GET /a.txt x3 => 429
  > X-Key: alice
  Retry-After: 2
  RateLimit: "reply";r=0;t=32
--- error_log
~ \[error\] .*throttled by zone "reply", retry after (1\d{3}|2000) ms
--- no_error_log
cost exceeds



=== TEST 2: keys are independent
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "z";r=0;t=120
GET /a.txt => 429
  > X-Key: alice
  Retry-After: 60
GET /a.txt => 200
  > X-Key: bob
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  > X-Key: bob
  RateLimit: "z";r=0;t=120
GET /a.txt => 429
  > X-Key: bob
  Retry-After: 60
GET /a.txt => 429
  > X-Key: alice
  RateLimit: "z";r=0;t=120



=== TEST 3: an empty key is not limited
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
}
--- requests
GET /a.txt x5 => 200
  X-Status: PASSED
  no X-Limit
  no X-Remaining
  no RateLimit
  no RateLimit-Policy
  no Retry-After
  body: a
# the same location limits a request that has a key
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=0;t=60
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
# and an empty key still passes
GET /a.txt => 200
  X-Status: PASSED
  no RateLimit



=== TEST 4: throttle_status sets the rejection status
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z;
    throttle_status 503;
}
--- requests
GET /a.txt => 200
  RateLimit: "z";r=0;t=60
GET /a.txt x2 => 503
  Retry-After: 60
  RateLimit: "z";r=0;t=60
--- error_log
throttled by zone "z", retry after



=== TEST 5: cost=N charges N units; remaining units too few for the cost are rejected
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=2;
}
--- requests
GET /a.txt => 200
  RateLimit-Policy: "z";q=5;w=10
  RateLimit: "z";r=3;t=4
GET /a.txt => 200
  RateLimit: "z";r=1;t=8
# one unit left, the request costs two
GET /a.txt => 429
  Retry-After: 2
  RateLimit: "z";r=1;t=8



=== TEST 6: a cost larger than the limit is always rejected, without Retry-After, and charges nothing
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=6;
    add_header X-Status $throttle_status always;
    add_header X-Retry-After $throttle_retry_after always;
}
location = /b.txt {
    throttle zone=z;
}
--- requests
GET /a.txt x3 => 429
  no Retry-After
  RateLimit-Policy: "z";q=5;w=10
  RateLimit: "z";r=5;t=0
  X-Status: REJECTED
  X-Retry-After: 0
GET /b.txt => 200
  RateLimit: "z";r=4;t=2
--- error_log
throttled by zone "z": cost exceeds the zone's limit of 5
--- no_error_log
retry after



=== TEST 7: cost=$arg_cost is evaluated per request; cost=0 reports without charging
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=$arg_cost;
}
--- requests
GET /a.txt?cost=3 => 200
  RateLimit: "z";r=2;t=6
GET /a.txt?cost=0 => 200
  RateLimit: "z";r=2;t=6
GET /a.txt?cost=2 => 200
  RateLimit: "z";r=0;t=10
GET /a.txt?cost=1 => 429
  Retry-After: 2
  RateLimit: "z";r=0;t=10
# a zero cost fits even when nothing remains
GET /a.txt?cost=0 => 200
  no Retry-After
  RateLimit: "z";r=0;t=10



=== TEST 8: cost from a request header
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=$http_x_cost;
}
--- requests
GET /a.txt => 200
  > X-Cost: 4
  RateLimit: "z";r=1;t=8
GET /a.txt => 429
  > X-Cost: 2
  Retry-After: 2
  RateLimit: "z";r=1;t=8
GET /a.txt => 200
  > X-Cost: 1
  RateLimit: "z";r=0;t=10



=== TEST 9: an invalid runtime cost is logged and allowed by default (throttle_on_error allow), charging nothing
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    add_header X-Status $throttle_status always;
    add_header X-Remaining $throttle_remaining always;
}
--- requests
GET /a.txt?cost=abc => 200
  X-Status: ERROR_ALLOWED
  no X-Remaining
  no RateLimit
  no RateLimit-Policy
  no Retry-After
  body: a
GET /a.txt?cost=-1 => 200
  X-Status: ERROR_ALLOWED
GET /a.txt?cost=99999999999 => 200
  X-Status: ERROR_ALLOWED
# missing argument: an empty cost
GET /a.txt => 200
  X-Status: ERROR_ALLOWED
# none of them was charged
GET /a.txt?cost=1 => 200
  X-Status: PASSED
  RateLimit: "z";r=4;t=2
--- error_log
throttle: cost "abc" for zone "z" is not a non-negative integer
throttle: cost "-1" for zone "z" is not a non-negative integer
throttle: cost "99999999999" for zone "z" is too large
throttle: cost "" for zone "z" is empty



=== TEST 10: cost extremes: the largest cost is rejected without overflow, a larger one is an error, leading zeros are fine
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=1000000000 => 429
  X-Status: REJECTED
  no Retry-After
GET /a.txt?cost=1000000001 => 200
  X-Status: ERROR_ALLOWED
GET /a.txt?cost=+1 => 200
  X-Status: ERROR_ALLOWED
GET /a.txt?cost=005 => 200
  X-Status: PASSED
  RateLimit: "z";r=0;t=10
--- error_log
throttled by zone "z": cost exceeds the zone's limit of 5
throttle: cost "1000000001" for zone "z" is too large
throttle: cost "+1" for zone "z" is not a non-negative integer



=== TEST 11: throttle_on_error deny answers an invalid cost with throttle_status
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=4;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    throttle_on_error deny;
    add_header X-Status $throttle_status always;
}
location /dir/ {
    throttle zone=z cost=$arg_cost;
    throttle_on_error deny;
    throttle_status 503;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=abc => 429
  X-Status: ERROR_DENIED
  no Retry-After
  no RateLimit
GET /dir/?cost=abc => 503
  X-Status: ERROR_DENIED
  no Retry-After
GET /a.txt?cost=1 => 200
  X-Status: PASSED
  RateLimit: "z";r=4;t=2
--- error_log
throttle: cost "abc" for zone "z" is not a non-negative integer



=== TEST 12: variables on passed and rejected requests
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
    add_header X-Reset $throttle_reset always;
    add_header X-Retry-After $throttle_retry_after always;
}
location = /b.txt {
    add_header X-Status $throttle_status always;
    add_header X-Limit $throttle_limit always;
}
--- requests
GET /a.txt => 200
  X-Status: PASSED
  X-Limit: 2
  X-Remaining: 1
  X-Reset: 60
  X-Retry-After: 0
GET /a.txt => 200
  X-Status: PASSED
  X-Limit: 2
  X-Remaining: 0
  X-Reset: 120
  X-Retry-After: 0
GET /a.txt => 429
  X-Status: REJECTED
  X-Limit: 2
  X-Remaining: 0
  X-Reset: 120
  X-Retry-After: 60
# a location without throttle: the variables are empty
GET /b.txt => 200
  no X-Status
  no X-Limit
  no RateLimit



=== TEST 13: throttle_log_level
--- http_config
throttle_zone k zone=e:1m rate=1r/m burst=0;
throttle_zone k zone=w:1m rate=1r/m burst=0;
throttle_zone k zone=n:1m rate=1r/m burst=0;
throttle_zone k zone=i:1m rate=1r/m burst=0;
--- config
location = /e.txt {
    throttle zone=e;
    try_files /a.txt =404;
}
location = /w.txt {
    throttle zone=w;
    throttle_log_level warn;
    try_files /a.txt =404;
}
location = /n.txt {
    throttle zone=n;
    throttle_log_level notice;
    try_files /a.txt =404;
}
location = /i.txt {
    throttle zone=i;
    throttle_log_level info;
    try_files /a.txt =404;
}
--- requests
GET /e.txt => 200
GET /e.txt => 429
GET /w.txt => 200
GET /w.txt => 429
GET /n.txt => 200
GET /n.txt => 429
GET /i.txt => 200
GET /i.txt => 429
--- error_log
~ \[error\] .*throttled by zone "e", retry after \d+ ms
~ \[warn\] .*throttled by zone "w", retry after \d+ ms
~ \[notice\] .*throttled by zone "n", retry after \d+ ms
~ \[info\] .*throttled by zone "i", retry after \d+ ms
--- no_error_log
~ \[error\] .*throttled by zone "[wni]"



=== TEST 14: throttle lines are inherited by blocks that have none, and only by them
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=5;
throttle_zone k zone=b:1m rate=1r/m burst=3;
throttle_zone k zone=c:1m rate=1r/m burst=0;
throttle zone=a;
--- config
throttle_status 503;
location / {
}
location /sub/ {
    throttle zone=b;
    location /sub/inner/ {
    }
}
location /c/ {
    throttle zone=c;
}
--- user_files
>>> sub/x.txt
x
>>> sub/inner/y.txt
y
>>> c/z.txt
z
--- requests
# from http{}
GET /a.txt => 200
  RateLimit: "a";r=5;t=60
# its own line replaces the inherited one
GET /sub/x.txt => 200
  RateLimit: "b";r=3;t=60
# a nested location inherits from its parent
GET /sub/inner/y.txt => 200
  RateLimit: "b";r=2;t=120
# zone a was charged once only
GET /a.txt => 200
  RateLimit: "a";r=4;t=120
# throttle_status is inherited from server{}
GET /c/z.txt => 200
GET /c/z.txt => 503
  Retry-After: 60



=== TEST 15: rate units r/s, r/h, r/d, and a period that is not whole seconds
--- http_config
throttle_zone k zone=s:1m rate=1r/s;
throttle_zone k zone=h:1m rate=2r/h burst=1;
throttle_zone k zone=d:1m rate=1r/d;
throttle_zone k zone=odd:1m rate=7r/m burst=6;
--- config
location = /odd.txt {
    throttle zone=odd;
    try_files /a.txt =404;
}
location = /s.txt {
    throttle zone=s;
    try_files /a.txt =404;
}
location = /h.txt {
    throttle zone=h;
    try_files /a.txt =404;
}
location = /d.txt {
    throttle zone=d;
    try_files /a.txt =404;
}
--- requests
GET /s.txt => 200
  RateLimit-Policy: "s";q=1;w=1
  RateLimit: "s";r=0;t=1
GET /s.txt => 429
  Retry-After: 1
GET /h.txt => 200
  RateLimit-Policy: "h";q=2;w=3600
  RateLimit: "h";r=1;t=1800
GET /h.txt => 200
  RateLimit: "h";r=0;t=3600
GET /h.txt => 429
  Retry-After: 1800
GET /d.txt => 200
  RateLimit-Policy: "d";q=1;w=86400
  RateLimit: "d";r=0;t=86400
GET /d.txt => 429
  Retry-After: 86400
  RateLimit: "d";r=0;t=86400
# 7r/m: T = 60/7 s is not a whole number of seconds; t rounds up
GET /odd.txt => 200
  RateLimit-Policy: "odd";q=7;w=60
  RateLimit: "odd";r=6;t=9



=== TEST 16: the funnel drains with time
--- http_config
throttle_zone k zone=z:1m rate=4r/s burst=0;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  RateLimit: "z";r=0;t=1
GET /a.txt => 429
  Retry-After: 1
# T = 250 ms
sleep 0.3
GET /a.txt => 200
  RateLimit: "z";r=0;t=1



=== TEST 17: empty_gif and HEAD requests are limited too
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location = /gif {
    throttle zone=z;
    empty_gif;
}
--- requests
GET /gif => 200
  Content-Type: image/gif
  RateLimit: "z";r=1;t=60
HEAD /gif => 200
  RateLimit: "z";r=0;t=120
HEAD /gif => 429
  Retry-After: 60
  RateLimit: "z";r=0;t=120



=== TEST 18: throttle_status 403 under "satisfy any" must still reject
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    satisfy any;
    allow 127.0.0.1;
    deny all;
    throttle zone=z;
    throttle_status 403;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  X-Status: PASSED
GET /a.txt => 403
  X-Status: REJECTED
  Retry-After: 60



=== TEST 19: both workers share one zone
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=29;
--- config
location / {
    throttle zone=z;
    add_header X-Pid $pid always;
}
--- requests eval
# 30 connections spread over the two workers; each sees the count left by
# all the requests before it
my $out = '';
for my $n (1 .. 30) {
    my ($r, $t) = (30 - $n, 60 * $n);
    $out .= "GET /a.txt => 200\n  RateLimit: \"z\";r=$r;t=$t\n";
}
$out . "GET /a.txt => 429\n  Retry-After: 60\n  RateLimit: \"z\";r=0;t=1800\n";
--- distinct
X-Pid >= 2



=== TEST 20: concurrent requests: exactly burst+1 of them pass
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=19;
--- config
location / {
    throttle zone=z;
    add_header X-Pid $pid always;
}
--- requests
parallel 60 /a.txt => 200 x20, 429 x40
GET /a.txt => 429
  RateLimit: "z";r=0;t=1200
--- distinct
X-Pid >= 2
