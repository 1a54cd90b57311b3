# SPDX-License-Identifier: BSD-2-Clause
# A request is counted once: internal redirects do not count it again, and
# subrequests are not limited.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: index redirect (/dir/ -> /dir/index.html) counts once
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
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



=== TEST 2: error_page 404 /index.html counts once
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
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



=== TEST 3: try_files to a named location limited by the same zone counts once
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
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



=== TEST 4: the decision is made at the first limited location; the redirect target's zone is not charged
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=1;
throttle_zone k zone=b:1m rate=1r/m burst=1;
--- config
location /x/ {
    throttle zone=a;
    try_files $uri @b;
}
location @b {
    throttle zone=b;
    try_files /b.txt =404;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
GET /x/1 => 200
  RateLimit: "a";r=1;t=60
  body: b
GET /x/2 => 200
  RateLimit: "a";r=0;t=120
GET /b.txt => 200
  RateLimit: "b";r=1;t=60



=== TEST 5: a request redirected from an unlimited location is counted where it lands
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location /r/ {
    try_files $uri @limited;
}
location @limited {
    throttle zone=z;
    try_files /a.txt =404;
}
--- requests
GET /r/x => 200
  RateLimit: "z";r=1;t=60
  body: a
GET /r/x => 200
  RateLimit: "z";r=0;t=120
GET /r/x => 429
  Retry-After: 60



=== TEST 6: error_page 429 to a location limited by the same zone: the custom page, once
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
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



=== TEST 7: subrequests (SSI includes) are not limited and not charged
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=0;
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



=== TEST 8: X-Accel-Redirect from an upstream to a limited location counts once
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
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
