# SPDX-License-Identifier: BSD-2-Clause
# nginx -s reload: zones with the same name and size keep their state; a
# changed key is refused and the old configuration keeps serving.
#
# A reload takes a few hundred milliseconds, so values read after it that
# count down in seconds (t=, Retry-After) may be one second lower.

use ThrottleTest;
run_blocks();

__DATA__

=== TEST 1: same zone name and size: the state survives a reload
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt x2 => 200
  X-Gen: 1
GET /a.txt => 429
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- requests_after_reload
GET /a.txt x2 => 429
  X-Gen: 2
  Retry-After: {60-}
  RateLimit: "z";r=0;t={120-}
--- no_error_log
[emerg]



=== TEST 2: a new burst applies to the kept state
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt => 429
--- reload_http_config
throttle_zone k zone=z:1m rate=1r/m burst=3;
--- requests_after_reload
# a fresh key would get r=3;t=60
GET /a.txt => 200
  RateLimit-Policy: "z";q=4;w=240
  RateLimit: "z";r=1;t={180-}



=== TEST 3: a new zone size starts afresh
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt => 429
--- reload_http_config
throttle_zone k zone=z:2m rate=1r/m burst=1;
--- requests_after_reload
GET /a.txt => 200
  RateLimit: "z";r=1;t=60



=== TEST 4: a renamed zone starts afresh; an untouched zone keeps its state
--- http_config
throttle_zone k zone=old:1m rate=1r/m burst=1;
throttle_zone k zone=kept:1m rate=1r/m burst=1;
--- config
location = /a.txt {
    throttle zone=old;
}
location = /b.txt {
    throttle zone=kept;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt => 429
GET /b.txt => 200
  RateLimit: "kept";r=1;t=60
--- reload_http_config
throttle_zone k zone=new:1m rate=1r/m burst=1;
throttle_zone k zone=kept:1m rate=1r/m burst=1;
--- reload_config
location = /a.txt {
    throttle zone=new;
}
location = /b.txt {
    throttle zone=kept;
}
--- requests_after_reload
GET /a.txt => 200
  RateLimit: "new";r=1;t=60
GET /b.txt => 200
  RateLimit: "kept";r=0;t={120-}



=== TEST 5: changing a zone's key is refused; the old configuration and state keep serving
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt x2 => 200
  X-Gen: 1
--- reload_http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1;
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*throttle_zone "z" uses the "\$http_x_key" key while previously it used the "k" key
--- requests_after_reload
GET /a.txt => 429
  X-Gen: 1
  RateLimit: "z";r=0;t={120-}
GET /a.txt => 429
  > X-Key: someone
  X-Gen: 1



=== TEST 5a: making a local zone async is refused (its table keeps hashes, not the names the sync sends); the old configuration and state keep serving
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt x2 => 200
  X-Gen: 1
--- reload_http_config
throttle_redis main server=127.0.0.1:1 timeout=50ms;
throttle_zone k zone=z:1m rate=1r/m burst=1 redis=main sync=async;
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*throttle_zone "z" changed to sync=async; rename the zone or change its size to start afresh
--- requests_after_reload
GET /a.txt => 429
  X-Gen: 1
  RateLimit: "z";r=0;t={120-}



=== TEST 6: a reload naming an unknown zone is refused; the old configuration keeps serving
--- http_config
throttle_zone k zone=z:1m rate=1r/m burst=1;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt => 200
--- reload_config
location / {
    throttle zone=nope;
    add_header X-Gen 2 always;
}
--- reload_fails
unknown zone "nope" in "throttle" directive
--- requests_after_reload
GET /a.txt => 200
  X-Gen: 1
  RateLimit: "z";r=0;t={120-}
