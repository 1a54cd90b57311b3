# SPDX-License-Identifier: BSD-2-Clause
# concurrent= in the configuration: nginx -t refuses, with a message naming
# the directive and the offending parameter, a concurrent zone with a
# rate's parameters (rate=, burst=, algorithm=, log_max=) or sync=async,
# lease= without concurrent=, concurrent= or lease= out of range or not a
# number, and a throttle line with delay=, cost= or settle= on a
# concurrent zone; the edges of the ranges start (local and strict).
#
# The messages are matched loosely: a line of nginx -t's output that
# names the directive and the parameter, and is not the message of a
# parameter throttle_zone does not know at all (": unknown in"), which is
# what a module without concurrent= says.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

=== TEST 1: concurrent= with rate=
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 rate=1r/s;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\brate=)(?=.*concurrent)



=== TEST 2: concurrent= with burst=
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 burst=2;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\bburst=)(?=.*concurrent)



=== TEST 3: concurrent= with algorithm=
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 algorithm=gcra;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\balgorithm=)(?=.*concurrent)



=== TEST 4: concurrent= with log_max=
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 log_max=10;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\blog_max=)(?=.*concurrent)



=== TEST 5: concurrent= with sync=async
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=c:1m concurrent=3 redis=main sync=async;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\bsync=)(?=.*concurrent)



=== TEST 6: lease= without concurrent=
--- http_config
throttle_zone $http_x_key zone=c:1m rate=1r/s lease=10s;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\blease=)



=== TEST 7: concurrent=0
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=0;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\bconcurrent=)



=== TEST 8: concurrent=1000001, above the most places a key may have
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=1000001;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\bconcurrent=)



=== TEST 9: concurrent= that is not a number
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=x;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\bconcurrent=)



=== TEST 10: lease=500ms, below 1s
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 lease=500ms;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\blease=)



=== TEST 11: lease=2d, above 1d
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 lease=2d;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\blease=)



=== TEST 12: lease= that is not a time
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3 lease=long;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*"throttle_zone")(?=.*\blease=)



=== TEST 13: delay= on a concurrent zone
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3;
--- config
location / {
    throttle zone=c delay=1;
}
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*\bthrottle\b(?!-))(?=.*\bdelay=)



=== TEST 14: cost= on a concurrent zone
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3;
--- config
location / {
    throttle zone=c cost=2;
}
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*\bthrottle\b(?!-))(?=.*\bcost=)



=== TEST 15: settle= on a concurrent zone
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=3;
--- config
location / {
    throttle zone=c settle=$http_x_used;
}
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*\bthrottle\b(?!-))(?=.*\bsettle=)



=== TEST 16: delay= on a concurrent zone defined after the throttle line
--- http_config
throttle zone=c delay=1;
throttle_zone $http_x_key zone=c:1m concurrent=3;
--- must_die
~ (?m)^(?!.*: unknown in )(?=.*\bthrottle\b(?!-))(?=.*\bdelay=)



=== TEST 17: the edges start: concurrent=1 and 1000000, lease=1s and 1d (local); a static file's place is free once it is served
--- http_config
throttle_zone $http_x_key zone=one:1m concurrent=1 lease=1s;
throttle_zone $http_x_key zone=many:1m concurrent=1000000 lease=1d;
throttle_zone $http_x_key zone=hours:1m concurrent=2 lease=24h;
--- config
location = /a.txt {
    throttle zone=one;
    add_header X-Status $throttle_status always;
}
location = /b.txt {
    throttle zone=many;
}
location = /index.html {
    throttle zone=hours;
}
--- requests
# one connection: nginx ends a request (its log phase) before it reads
# the next
keepalive {
GET /a.txt => 200
  > X-Key: k
  RateLimit-Policy: "one";q=1
  RateLimit: "one";r=0
  X-Status: PASSED
GET /a.txt => 200
  > X-Key: k
  RateLimit: "one";r=0
  X-Status: PASSED
}
GET /b.txt => 200
  > X-Key: k
  RateLimit-Policy: "many";q=1000000
  RateLimit: "many";r=999999
GET /index.html => 200
  > X-Key: k
  RateLimit-Policy: "hours";q=2
  RateLimit: "hours";r=1



=== TEST 18: strict: concurrent= with redis= and sync=strict starts
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=c:1m concurrent=2 lease=5s redis=main sync=strict;
--- config
location = /a.txt {
    throttle zone=c;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit-Policy: "c";q=2
  RateLimit: "c";r=1
# the first one's place goes back to Redis after its answer, and may not
# be back yet
GET /a.txt => 200
  > X-Key: k
  RateLimit ~ ^"c";r=[01]$



=== TEST 19: a reload that changes a concurrent zone's lease is refused; the old configuration keeps serving
--- http_config
throttle_zone $http_x_key zone=c:1m concurrent=2 lease=10s;
--- config
location = /a.txt {
    throttle zone=c;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Gen: 1
--- reload_http_config
throttle_zone $http_x_key zone=c:1m concurrent=2 lease=20s;
--- reload_config
location = /a.txt {
    throttle zone=c;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*"c".*lease
--- requests_after_reload
GET /a.txt => 200
  > X-Key: k
  X-Gen: 1
  RateLimit-Policy: "c";q=2



=== TEST 20: a reload that turns a rate zone into a concurrent one is refused
--- http_config
throttle_zone $http_x_key zone=c:1m rate=1r/m burst=5;
--- config
location = /a.txt {
    throttle zone=c;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Gen: 1
--- reload_http_config
throttle_zone $http_x_key zone=c:1m concurrent=2;
--- reload_config
location = /a.txt {
    throttle zone=c;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*"c".*concurrent
--- requests_after_reload
GET /a.txt => 200
  > X-Key: k
  X-Gen: 1
  RateLimit-Policy: "c";q=6;w=360
