# SPDX-License-Identifier: BSD-2-Clause
# throttle_headers on | legacy | off, and which responses carry the fields.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: legacy sends X-RateLimit-* and no RateLimit fields
--- http_config
throttle_zone k zone=reply:1m rate=30r/m burst=15;
--- config
location / {
    throttle zone=reply;
    throttle_headers legacy;
}
--- requests
GET /a.txt => 200
  X-RateLimit-Limit: 16
  X-RateLimit-Remaining: 15
  X-RateLimit-Reset: 2
  no RateLimit
  no RateLimit-Policy
  no Retry-After
keepalive {
GET /a.txt x14 => 200
  X-RateLimit-Limit: 16
  no RateLimit
}
GET /a.txt => 200
  X-RateLimit-Limit: 16
  X-RateLimit-Remaining: 0
  X-RateLimit-Reset: 32
GET /a.txt => 429
  Retry-After: 2
  X-RateLimit-Limit: 16
  X-RateLimit-Remaining: 0
  X-RateLimit-Reset: 32
  no RateLimit
  no RateLimit-Policy



=== TEST 2: off sends no field, the variables still work
--- http_config
throttle_zone k zone=z:1m rate=30r/m burst=0;
--- config
location / {
    throttle zone=z;
    throttle_headers off;
    add_header X-Retry-After $throttle_retry_after always;
    add_header X-Remaining $throttle_remaining always;
}
--- requests
GET /a.txt => 200
  no RateLimit
  no RateLimit-Policy
  no X-RateLimit-Limit
  no X-RateLimit-Remaining
  no X-RateLimit-Reset
  no Retry-After
  X-Remaining: 0
  X-Retry-After: 0
GET /a.txt => 429
  no RateLimit
  no RateLimit-Policy
  no X-RateLimit-Limit
  no X-RateLimit-Remaining
  no X-RateLimit-Reset
  no Retry-After
  X-Retry-After: 2



=== TEST 3: throttle_headers is inherited and can be overridden
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=9;
--- config
throttle_headers legacy;
throttle zone=z;
location / {
}
location /dir/ {
    throttle_headers on;
}
--- requests
GET /a.txt => 200
  X-RateLimit-Remaining: 9
  no RateLimit
GET /dir/ => 200
  RateLimit: "z";r=8;t=120
  no X-RateLimit-Remaining
  body: dir index



=== TEST 4: the zone name appears as is in the fields
--- http_config
throttle_zone k zone=api.v1_x-Y:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=api.v1_x-Y;
}
--- requests
GET /a.txt => 200
  RateLimit-Policy: "api.v1_x-Y";q=2;w=120
  RateLimit: "api.v1_x-Y";r=1;t=60
GET /a.txt => 200
GET /a.txt => 429
--- error_log
throttled by zone "api.v1_x-Y", retry after



=== TEST 5: a 404 from a limited location carries the fields and was counted
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /missing.txt => 404
  RateLimit: "z";r=1;t=60
  no Retry-After
GET /a.txt => 200
  RateLimit: "z";r=0;t=120
GET /missing.txt => 429
  Retry-After: 60



=== TEST 6: a 304 Not Modified carries the fields
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    if_modified_since before;
}
--- requests
GET /a.txt => 304
  > If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT
  RateLimit-Policy: "z";q=2;w=120
  RateLimit: "z";r=1;t=60



=== TEST 7: error_page for 429 keeps the status and the fields
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- user_files
>>> errors/429.html
slow down
--- config
location / {
    throttle zone=z;
    error_page 429 /errors/429.html;
}
location /errors/ {
}
--- requests
GET /a.txt => 200
GET /a.txt => 429
  Retry-After: 60
  RateLimit-Policy: "z";q=1;w=60
  RateLimit: "z";r=0;t=60
  body: slow down
# the error page location is not limited itself
GET /errors/429.html => 200
  no RateLimit
  body: slow down



=== TEST 8: error_page with a status change (=503) keeps Retry-After
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z;
    error_page 429 =503 /index.html;
}
--- requests
GET /a.txt => 200
GET /a.txt => 503
  Retry-After: 60
  RateLimit: "z";r=0;t=60
  body: index page



=== TEST 9: fields are sent once on every response of a keep-alive connection
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=2;
--- config
location / {
    throttle zone=z;
}
location = /b.txt {
}
--- requests
keepalive {
GET /a.txt => 200
  RateLimit: "z";r=2;t=60
  RateLimit-Policy: "z";q=3;w=180
GET /b.txt => 200
  no RateLimit
  no RateLimit-Policy
GET /a.txt => 200
  RateLimit: "z";r=1;t=120
  RateLimit-Policy: "z";q=3;w=180
GET /a.txt => 200
  RateLimit: "z";r=0;t=180
GET /a.txt => 429
  Retry-After: 60
  RateLimit: "z";r=0;t=180
GET /b.txt => 200
  no Retry-After
  no RateLimit
}
