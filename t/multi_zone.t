# SPDX-License-Identifier: BSD-2-Clause
# Several throttle lines in one block: checked together, a rejection by one
# zone charges none, the fields and variables describe the binding zone.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: a request rejected by one zone is charged to neither
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=1;
throttle_zone k zone=b:1m rate=1r/m burst=9;
--- config
# /a.txt: both zones; /b.txt: zone b alone, to read b's state
location = /a.txt {
    throttle zone=a;
    throttle zone=b;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
# a has fewer units left than b: a binds
GET /a.txt => 200
  RateLimit-Policy: "a";q=2;w=120
  RateLimit: "a";r=1;t=60
GET /a.txt => 200
  RateLimit: "a";r=0;t=120
GET /a.txt x4 => 429
  Retry-After: 60
  RateLimit-Policy: "a";q=2;w=120
  RateLimit: "a";r=0;t=120
# b was charged for the two admitted requests only: 10 - 2 - this one = 7
GET /b.txt => 200
  RateLimit-Policy: "b";q=10;w=600
  RateLimit: "b";r=7;t=180
# and a is still full
GET /a.txt => 429
  RateLimit: "a";r=0;t=120
--- error_log
throttled by zone "a", retry after
--- no_error_log
throttled by zone "b"



=== TEST 2: when all pass, the zone with the fewest units left binds, whatever the order of the lines
--- http_config
throttle_zone $http_x_key zone=big:1m rate=1r/m burst=9;
throttle_zone $http_x_key zone=small:1m rate=1r/m burst=2;
--- config
location = /a.txt {
    throttle zone=big;
    throttle zone=small;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
}
location = /b.txt {
    throttle zone=small;
    throttle zone=big;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
}
--- requests
GET /a.txt => 200
  > X-Key: u1
  RateLimit-Policy: "small";q=3;w=180
  RateLimit: "small";r=2;t=60
  X-Limit: 3
  X-Remaining: 2
GET /b.txt => 200
  > X-Key: u2
  RateLimit-Policy: "small";q=3;w=180
  RateLimit: "small";r=2;t=60
  X-Limit: 3
  X-Remaining: 2



=== TEST 3: when all pass, the binding zone may sort first or last
--- http_config
throttle_zone k zone=aa:1m rate=1r/m burst=1;
throttle_zone k zone=zz:1m rate=1r/m burst=5;
--- config
location / {
    throttle zone=zz;
    throttle zone=aa;
}
--- requests
GET /a.txt => 200
  RateLimit: "aa";r=1;t=60



=== TEST 4: when several zones reject, the one asking to wait longest binds
--- http_config
# fast: T = 30 s; slow: T = 60 s. The names sort both ways.
throttle_zone $http_x_key zone=fast:1m rate=2r/m;
throttle_zone $http_x_key zone=slow:1m rate=1r/m;
throttle_zone $http_x_key zone=alpha:1m rate=1r/m;
throttle_zone $http_x_key zone=beta:1m rate=2r/m;
--- config
location = /a.txt {
    throttle zone=fast;
    throttle zone=slow;
    add_header X-Retry-After $throttle_retry_after always;
}
location = /b.txt {
    throttle zone=alpha;
    throttle zone=beta;
    add_header X-Retry-After $throttle_retry_after always;
}
--- requests
GET /a.txt => 200
  > X-Key: u
  RateLimit ~ ^("fast";r=0;t=30|"slow";r=0;t=60)$
GET /a.txt => 429
  > X-Key: u
  Retry-After: 60
  RateLimit-Policy: "slow";q=1;w=60
  RateLimit: "slow";r=0;t=60
  X-Retry-After: 60
GET /b.txt => 200
  > X-Key: u
  RateLimit ~ ^("alpha";r=0;t=60|"beta";r=0;t=30)$
GET /b.txt => 429
  > X-Key: u
  Retry-After: 60
  RateLimit-Policy: "alpha";q=1;w=60
  RateLimit: "alpha";r=0;t=60
  X-Retry-After: 60



=== TEST 5: the rejecting zone binds even if a passing zone has fewer units left
--- http_config
throttle_zone k zone=p:1m rate=1r/m burst=2;
throttle_zone k zone=q:1m rate=1r/m burst=0;
--- config
location = /a.txt {
    throttle zone=p cost=2;
    throttle zone=q;
}
location = /b.txt {
    throttle zone=p cost=2;
    throttle zone=q cost=0;
}
--- requests
# p: 1 unit left, q: 0 left: q binds
GET /a.txt => 200
  RateLimit: "q";r=0;t=60
# p rejects (1 left, cost 2); q admits a cost-0 request with 0 left
GET /b.txt => 429
  Retry-After: 60
  RateLimit-Policy: "p";q=3;w=180
  RateLimit: "p";r=1;t=120



=== TEST 6: an empty key leaves its zone out of the decision
--- http_config
throttle_zone k zone=all:1m rate=1r/m burst=9;
throttle_zone $http_x_user zone=byuser:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=all;
    throttle zone=byuser;
}
--- requests
# no X-User: only "all" applies
GET /a.txt => 200
  RateLimit-Policy: "all";q=10;w=600
  RateLimit: "all";r=9;t=60
GET /a.txt => 200
  > X-User: u
  RateLimit: "byuser";r=1;t=60
GET /a.txt => 200
  > X-User: u
  RateLimit: "byuser";r=0;t=120
GET /a.txt x2 => 429
  > X-User: u
  Retry-After: 60
  RateLimit: "byuser";r=0;t=120
# "all" was charged by the three admitted requests only (10 - 3 - this one)
GET /a.txt => 200
  RateLimit: "all";r=6;t=240



=== TEST 7: each line has its own cost
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=5;
throttle_zone k zone=b:1m rate=1r/m burst=5;
--- config
location = /a.txt {
    throttle zone=a cost=3;
    throttle zone=b;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
GET /a.txt => 200
  RateLimit: "a";r=3;t=180
GET /a.txt => 200
  RateLimit: "a";r=0;t=360
GET /a.txt => 429
  Retry-After: 180
  RateLimit: "a";r=0;t=360
# b: 2 units charged, and 1 now
GET /b.txt => 200
  RateLimit: "b";r=3;t=180



=== TEST 8: an invalid cost on one line fails the whole decision, nothing charged
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=5;
throttle_zone k zone=b:1m rate=1r/m burst=5;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b cost=$arg_cost;
    add_header X-Status $throttle_status always;
}
location = /b.txt {
    throttle zone=a;
    throttle zone=b;
}
--- requests
GET /a.txt?cost=x => 200
  X-Status: ERROR_ALLOWED
  no RateLimit
GET /b.txt => 200
  RateLimit ~ ^"[ab]";r=5;t=60$
--- error_log
throttle: cost "x" for zone "b" is not a non-negative integer



=== TEST 9: concurrent requests over two zones: the tight one admits exactly its limit, the other is charged exactly that
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=9;
throttle_zone k zone=b:1m rate=1r/m burst=29;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
parallel 50 /a.txt => 200 x10, 429 x40
# b: 30 - 10 admitted - this one
GET /b.txt => 200
  RateLimit: "b";r=19;t=660
