# SPDX-License-Identifier: BSD-2-Clause
# throttle_dry_run: nothing is rejected, would-be rejections are reported.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: dry run never rejects; would-be rejections are marked, logged and not charged
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
    add_header X-Retry-After $throttle_retry_after always;
}
--- requests
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "z";r=0;t=120
# t stays at 120: the would-be rejections are not charged
GET /a.txt x3 => 200
  X-Status: REJECTED_DRY_RUN
  X-Retry-After: 60
  no Retry-After
  RateLimit-Policy: "z";q=2;w=120
  RateLimit: "z";r=0;t=120
  body: a
--- error_log
~ \[error\] .*throttled by zone "z" \(dry run\), retry after \d+ ms
--- no_error_log
~ throttled by zone "z", retry after



=== TEST 2: dry run ignores throttle_status
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z;
    throttle_dry_run on;
    throttle_status 503;
}
--- requests
GET /a.txt x3 => 200
  no Retry-After



=== TEST 3: dry run is inherited; a location with it off rejects on the same state
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
throttle_dry_run on;
throttle zone=z;
add_header X-Status $throttle_status always;
location / {
}
location = /b.txt {
    throttle_dry_run off;
}
--- requests
GET /a.txt x2 => 200
  X-Status: PASSED
GET /a.txt => 200
  X-Status: REJECTED_DRY_RUN
GET /b.txt => 429
  X-Status: REJECTED
  Retry-After: 60
  RateLimit: "z";r=0;t=120



=== TEST 4: dry run with a cost that can never fit
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z cost=3;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  X-Status: REJECTED_DRY_RUN
  no Retry-After
  RateLimit: "z";r=2;t=0
--- error_log
throttled by zone "z" (dry run): cost exceeds the zone's limit of 2



=== TEST 5: dry run logs at throttle_log_level
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z;
    throttle_dry_run on;
    throttle_log_level info;
}
--- requests
GET /a.txt x2 => 200
--- error_log
~ \[info\] .*throttled by zone "z" \(dry run\), retry after
--- no_error_log
~ \[error\] .*throttled by zone



=== TEST 6: dry run with several zones: a would-be rejection charges no zone
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=0;
throttle_zone k zone=b:1m rate=1r/m burst=9;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "a";r=0;t=60
GET /a.txt x3 => 200
  X-Status: REJECTED_DRY_RUN
  RateLimit: "a";r=0;t=60
GET /b.txt => 200
  RateLimit: "b";r=8;t=120



=== TEST 7: dry run never rejects, even when the cost cannot be evaluated and throttle_on_error is deny
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z cost=$arg_cost;
    throttle_dry_run on;
    throttle_on_error deny;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=abc => 200
  X-Status: ERROR_ALLOWED
GET /a.txt?cost=1 => 200
  X-Status: PASSED
--- error_log
throttle: cost "abc" for zone "z" is not a non-negative integer
