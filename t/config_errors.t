# SPDX-License-Identifier: BSD-2-Clause
# nginx -t refuses bad configurations with a message naming the directive
# and the offending value; good edge cases are accepted.

use ThrottleTest;
run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): the http{} of a block with none of its own, zone z,
for the throttle lines of a block to name. Its rate never matters: every
block that takes it expects nginx -t to fail, and what it says is about
a line of the block's own.

--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m;


=== TEST 1: unknown zone in throttle
--- config
location / {
    throttle zone=nope;
}
--- must_die
unknown zone "nope" in "throttle" directive
~ nginx\.conf:\d+



=== TEST 2: rate=0r/s
--- http_config
throttle_zone $http_x_key zone=z:1m rate=0r/s;
--- must_die
invalid rate "rate=0r/s" in "throttle_zone": it must be greater than zero



=== TEST 3: rate with an unknown unit
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/x;
--- must_die
invalid rate "rate=10r/x" in "throttle_zone"
unknown unit



=== TEST 4: rate that is not a rate
--- http_config
throttle_zone $http_x_key zone=z:1m rate=fast;
--- must_die
invalid rate "rate=fast" in "throttle_zone"



=== TEST 5: rate faster than the clock's resolution
--- http_config
throttle_zone $http_x_key zone=z:1m rate=2000000r/s;
--- must_die
invalid rate "rate=2000000r/s" in "throttle_zone"



=== TEST 6: burst=-1
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=-1;
--- must_die
invalid burst "burst=-1" in "throttle_zone"



=== TEST 7: burst too large for the rate
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=1000000000;
--- must_die
"throttle_zone" "z": burst is too large for this rate
burst=1000000000



=== TEST 8: zone too small
--- http_config
throttle_zone $http_x_key zone=z:4k rate=1r/m;
--- must_die
zone "z:4k" in "throttle_zone" is too small, it must be at least 32k



=== TEST 9: zone size that is not a size
--- http_config
throttle_zone $http_x_key zone=z:abc rate=1r/m;
--- must_die
invalid zone size "z:abc" in "throttle_zone"



=== TEST 10: zone without a size
--- http_config
throttle_zone $http_x_key zone=z rate=1r/m;
--- must_die
invalid zone "z" in "throttle_zone"



=== TEST 11: zone name with a character that cannot go into a header
--- http_config
throttle_zone $http_x_key zone=a/b:1m rate=1r/m;
--- must_die
invalid zone "a/b:1m" in "throttle_zone"



=== TEST 12: duplicate throttle_zone name
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m;
throttle_zone $remote_addr zone=z:1m rate=1r/m;
--- must_die
duplicate "throttle_zone" "z"
"$http_x_key"



=== TEST 13: duplicate throttle_zone name with another size
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m;
throttle_zone $remote_addr zone=z:2m rate=1r/m;
--- must_die
~ \[emerg\] .*(throttle_zone.*"z"|"z".*throttle_zone)




=== TEST 14: zone name already used by limit_req_zone
--- http_config
limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;
throttle_zone $http_x_key zone=z:1m rate=1r/m;
--- must_die
shared memory zone "z" is already declared for a different use



=== TEST 15: cost=abc
--- config
location / {
    throttle zone=z cost=abc;
}
--- must_die
invalid cost "abc" in "throttle"



=== TEST 16: cost=-1
--- config
location / {
    throttle zone=z cost=-1;
}
--- must_die
invalid cost "-1" in "throttle"



=== TEST 17: log_max= belongs to sliding_log
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m algorithm=sliding_window log_max=10;
--- must_die
"throttle_zone" "z": "log_max=" needs "algorithm=sliding_log"



=== TEST 18: a sliding_log beyond log_max names the values and the way out
--- http_config
throttle_zone $http_x_key zone=z:1m rate=2000r/s burst=5 algorithm=sliding_log;
--- must_die
"throttle_zone" "z": rate=2000r/s burst=5 keeps 2005 timestamps per key, more than log_max=1000
raise log_max= (up to 100000



=== TEST 18a: log_max out of range
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s algorithm=sliding_log log_max=100001;
--- must_die
invalid parameter "log_max=100001" in "throttle_zone": use a number from 1 to 100000



=== TEST 18b: log_max=0
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s algorithm=sliding_log log_max=0;
--- must_die
invalid parameter "log_max=0" in "throttle_zone"



=== TEST 18c: log_max not a number
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s algorithm=sliding_log log_max=1k;
--- must_die
invalid parameter "log_max=1k" in "throttle_zone"



=== TEST 19: algorithm=foo
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m algorithm=foo;
--- must_die
invalid algorithm "algorithm=foo" in "throttle_zone"
unknown



=== TEST 20: throttle_status 200
--- config
throttle_status 200;
--- must_die
invalid value "200" in "throttle_status" directive
between 400 and 599



=== TEST 21: throttle_status 600
--- config
throttle_status 600;
--- must_die
invalid value "600" in "throttle_status" directive



=== TEST 22: throttle_status that is not a number
--- config
throttle_status many;
--- must_die
invalid value "many" in "throttle_status" directive



=== TEST 23: throttle_headers maybe
--- config
throttle_headers maybe;
--- must_die
invalid value "maybe" in "throttle_headers" directive
"off", "on", "legacy"



=== TEST 24: throttle_log_level loud
--- config
throttle_log_level loud;
--- must_die
invalid value "loud" in "throttle_log_level" directive
"info", "notice", "warn", "error"



=== TEST 25: throttle_on_error sometimes
--- config
throttle_on_error sometimes;
--- must_die
invalid value "sometimes" in "throttle_on_error" directive
"allow", "deny"



=== TEST 26: throttle_dry_run maybe
--- config
throttle_dry_run maybe;
--- must_die
invalid value "maybe" in "throttle_dry_run" directive



=== TEST 27: missing rate=
--- http_config
throttle_zone $http_x_key zone=z:1m burst=5;
--- must_die
"throttle_zone" "z" must have "rate=" or "concurrent=" parameter



=== TEST 28: missing zone=
--- http_config
throttle_zone $http_x_key rate=1r/m;
--- must_die
"throttle_zone" must have "zone=name:size" parameter



=== TEST 29: throttle without zone=
--- config
throttle cost=1;
--- must_die
"throttle" must have "zone=name" parameter



=== TEST 30: redis= naming no throttle_redis
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main;
--- must_die
unknown redis=main in "throttle_zone" "z": no "throttle_redis" has that name



=== TEST 31: sync=async without redis=
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m sync=async;
--- must_die
"throttle_zone" "z": "sync=" needs "redis="



=== TEST 32: the same zone twice in one location
--- config
location / {
    throttle zone=z;
    throttle zone=z cost=2;
}
--- must_die
duplicate "throttle" for zone "z" in the same block



=== TEST 33: unknown parameters
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m window=1m;
--- must_die
invalid parameter "window=1m" in "throttle_zone"



=== TEST 34: unknown parameter in throttle
--- config
throttle zone=z nodelay;
--- must_die
invalid parameter "nodelay" in "throttle"



=== TEST 35: throttle_zone outside http{}
--- config
throttle_zone $http_x_key zone=z:1m rate=1r/m;
--- must_die
"throttle_zone" directive is not allowed here



=== TEST 36: a directive given twice in one block
--- config
throttle_status 429;
throttle_status 503;
--- must_die
"throttle_status" directive is duplicate



=== TEST 37: accepted edge values: 32k zone, status 400 and 599, case-insensitive keywords, zone used before it is defined
--- http_config
throttle zone=late;
throttle_zone k zone=late:32k rate=1r/m burst=0;
--- config
location / {
    throttle_status 400;
    throttle_headers LEGACY;
}
location /dir/ {
    throttle_status 599;
}
--- requests
GET /a.txt => 200
  X-RateLimit-Remaining: 0
GET /a.txt => 400
  X-RateLimit-Remaining: 0
  Retry-After: 60
GET /dir/ => 599
  RateLimit: "late";r=0;t=60



=== TEST 38: a constant key, burst=0 and cost=0 are accepted
--- http_config
throttle_zone "constant key" zone=z:1m rate=1r/m burst=0;
--- config
location / {
    throttle zone=z cost=0;
}
--- requests
GET /a.txt x3 => 200
  RateLimit: "z";r=1;t=0



=== TEST 39: phase= that is neither preaccess nor authorized
--- config
location / {
    throttle zone=z phase=bogus;
}
--- must_die
invalid parameter "phase=bogus" in "throttle": use phase=preaccess (before access checks, the default) or phase=authorized (once they let the request in)
~ nginx\.conf:\d+



=== TEST 40: phase= with no value
--- config
location / {
    throttle zone=z phase=;
}
--- must_die
invalid parameter "phase=" in "throttle": use phase=preaccess (before access checks, the default) or phase=authorized (once they let the request in)



=== TEST 41: the same zone in both phases of one block
--- config
location / {
    throttle zone=z;
    throttle zone=z phase=authorized;
}
--- must_die
duplicate "throttle" for zone "z" in the same block



=== TEST 42: the same zone in both phases of one block, authorized first
--- config
throttle zone=z phase=authorized;
throttle zone=z phase=preaccess;
--- must_die
duplicate "throttle" for zone "z" in the same block



=== TEST 43: five parameters: zone=, cost=, phase= and delay= are all there is
--- config
location / {
    throttle zone=z cost=1 phase=authorized delay=1 cost=2;
}
--- must_die
invalid number of arguments in "throttle" directive



=== TEST 44: throttle_metrics takes no parameter
--- config
location = /metrics {
    throttle_metrics on;
}
--- must_die
invalid number of arguments in "throttle_metrics" directive
~ nginx\.conf:\d+



=== TEST 45: throttle_metrics in the http block
--- http_config
throttle_metrics;
--- must_die
"throttle_metrics" directive is not allowed here



=== TEST 46: throttle_metrics in a server block
--- config
throttle_metrics;
--- must_die
"throttle_metrics" directive is not allowed here



=== TEST 47: throttle_metrics inside "if" in a location
--- config
location = /metrics {
    if ($arg_x) {
        throttle_metrics;
    }
}
--- must_die
"throttle_metrics" directive is not allowed here



=== TEST 48: throttle_metrics twice in a location
--- config
location = /metrics {
    throttle_metrics;
    throttle_metrics;
}
--- must_die
"throttle_metrics" directive is duplicate



=== TEST 49: delay= that is not a number
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    throttle zone=z delay=abc;
}
--- must_die
invalid parameter "delay=abc" in "throttle": units ahead of a request that goes on at once, 0 to 1000000000
~ nginx\.conf:\d+



=== TEST 50: delay=-1
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    throttle zone=z delay=-1;
}
--- must_die
invalid parameter "delay=-1" in "throttle": units ahead



=== TEST 51: delay= above 1000000000
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    throttle zone=z delay=1000000001;
}
--- must_die
invalid parameter "delay=1000000001" in "throttle": units ahead



=== TEST 52: delay= with no value
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    throttle zone=z delay=;
}
--- must_die
invalid parameter "delay=" in "throttle": units ahead



=== TEST 53: delay= with a time instead of units
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    throttle zone=z delay=100ms;
}
--- must_die
invalid parameter "delay=100ms" in "throttle": units ahead



=== TEST 54: delay= on a fixed_window zone defined after the line
--- config
location / {
    throttle zone=w delay=3;
}
--- http_config
throttle_zone $http_x_key zone=w:1m rate=10r/s burst=5 algorithm=fixed_window;
--- must_die
~ invalid parameter "delay=3" in "throttle" directive in \S+nginx\.conf:\d+: zone "w" has "algorithm=fixed_window", which cannot space requests out: it admits a window's count at any time in the window, with no time at which a request would conform; "delay=" needs "algorithm=gcra"



=== TEST 55: delay=0 on a sliding_window zone
--- http_config
throttle_zone $http_x_key zone=w:1m rate=10r/s algorithm=sliding_window;
--- config
location / {
    throttle zone=w delay=0;
}
--- must_die
invalid parameter "delay=0" in "throttle" directive
zone "w" has "algorithm=sliding_window", which cannot space requests out
"delay=" needs "algorithm=gcra"



=== TEST 56: delay= on a sliding_log zone, inherited by a location
--- http_config
throttle_zone $http_x_key zone=w:1m rate=10r/s algorithm=sliding_log;
--- config
throttle zone=w delay=2;
location / {
}
--- must_die
invalid parameter "delay=2" in "throttle" directive
zone "w" has "algorithm=sliding_log", which cannot space requests out



=== TEST 57: throttle_api without zones=
--- config
location = /throttle {
    throttle_api;
}
--- must_die
"throttle_api" must have "zones=name[,name...]" parameter



=== TEST 58: throttle_api with another parameter
--- config
location = /throttle {
    throttle_api zone=z;
}
--- must_die
invalid parameter "zone=z" in "throttle_api": unknown



=== TEST 59: throttle_api naming a zone that no throttle_zone defines
--- config
location = /throttle {
    throttle_api zones=z,nope;
}
--- must_die
unknown zone "nope" in "throttle_api" directive
~ nginx\.conf:\d+: no "throttle_zone" defines it



=== TEST 60: throttle_api naming a zone twice
--- config
location = /throttle {
    throttle_api zones=z,z;
}
--- must_die
invalid parameter "zones=z,z" in "throttle_api": zone "z" is named twice



=== TEST 61: throttle_api with an empty list
--- config
location = /throttle {
    throttle_api zones=;
}
--- must_die
invalid parameter "zones=" in "throttle_api": no zone is named



=== TEST 62: throttle_api with an empty name in the list
--- config
location = /throttle {
    throttle_api zones=z,;
}
--- must_die
invalid parameter "zones=z," in "throttle_api": a zone name is empty



=== TEST 63: throttle_api in a server block
--- config
throttle_api zones=z;
--- must_die
"throttle_api" directive is not allowed here



=== TEST 64: throttle_api in the http block
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m;
throttle_api zones=z;
--- must_die
"throttle_api" directive is not allowed here



=== TEST 65: throttle_api twice in a location
--- config
location = /throttle {
    throttle_api zones=z;
    throttle_api zones=z;
}
--- must_die
"throttle_api" directive is duplicate



=== TEST 66: throttle_api naming a zone of another module
--- http_config
limit_req_zone $binary_remote_addr zone=lr:1m rate=1r/s;
--- config
location = /throttle {
    throttle_api zones=lr;
}
--- must_die
the shared memory zone "lr" is already declared for a different use
