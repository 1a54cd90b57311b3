# SPDX-License-Identifier: BSD-2-Clause
# nginx -t refuses bad throttle_redis / redis= configurations with a message
# naming the directive and the offending value; good edge cases start.
# Blocks 34 on: the Redis Cluster (cluster=) and Sentinel (sentinel=,
# master=) forms.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

=== TEST 1: redis= names no throttle_redis
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=nope;
--- must_die
unknown redis=nope in "throttle_zone" "z"
no "throttle_redis" has that name



=== TEST 2: redis= names no throttle_redis: the message gives the line
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=nope;
--- must_die
~ redis=nope.*nginx\.conf:\d+



=== TEST 3: redis= names a backend declared under another name
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=Main;
--- must_die
unknown redis=Main in "throttle_zone"



=== TEST 4: server= with a port that is not a number
--- http_config
throttle_redis main server=garbage:x;
--- must_die
invalid parameter "server=garbage:x" in "throttle_redis": invalid port
~ nginx\.conf:\d+



=== TEST 5: server= out of range port
--- http_config
throttle_redis main server=127.0.0.1:99999;
--- must_die
invalid parameter "server=127.0.0.1:99999" in "throttle_redis"



=== TEST 6: server= empty
--- http_config
throttle_redis main server=;
--- must_die
invalid parameter "server=" in "throttle_redis": no host



=== TEST 7: server= a host that does not resolve
--- http_config
throttle_redis main server=no-such-host.invalid:6379;
--- must_die
invalid parameter "server=no-such-host.invalid:6379" in "throttle_redis": host not found



=== TEST 8: no server=, cluster= or sentinel= at all
--- http_config
throttle_redis main timeout=50ms;
--- must_die
"throttle_redis" "main" must have "server=host:port", "cluster=host:port,..." or "sentinel=host:port,..." parameter



=== TEST 9: timeout=abc
--- http_config
throttle_redis main server=127.0.0.1:6379 timeout=abc;
--- must_die
invalid parameter "timeout=abc" in "throttle_redis"



=== TEST 10: timeout=0
--- http_config
throttle_redis main server=127.0.0.1:6379 timeout=0;
--- must_die
invalid parameter "timeout=0" in "throttle_redis"



=== TEST 11: connect_timeout=abc
--- http_config
throttle_redis main server=127.0.0.1:6379 connect_timeout=abc;
--- must_die
invalid parameter "connect_timeout=abc" in "throttle_redis"



=== TEST 12: keepalive=0
--- http_config
throttle_redis main server=127.0.0.1:6379 keepalive=0;
--- must_die
invalid parameter "keepalive=0" in "throttle_redis": connections per worker, 1 to 64



=== TEST 13: keepalive=65
--- http_config
throttle_redis main server=127.0.0.1:6379 keepalive=65;
--- must_die
invalid parameter "keepalive=65" in "throttle_redis"



=== TEST 14: database=-1
--- http_config
throttle_redis main server=127.0.0.1:6379 database=-1;
--- must_die
invalid parameter "database=-1" in "throttle_redis"



=== TEST 15: database=x
--- http_config
throttle_redis main server=127.0.0.1:6379 database=x;
--- must_die
invalid parameter "database=x" in "throttle_redis"



=== TEST 16: an unknown parameter
--- http_config
throttle_redis main server=127.0.0.1:6379 bogus=1;
--- must_die
invalid parameter "bogus=1" in "throttle_redis": unknown



=== TEST 17: sync_interval= is not a throttle_redis parameter
--- http_config
throttle_redis main server=127.0.0.1:6379 sync_interval=100ms;
--- must_die
invalid parameter "sync_interval=100ms" in "throttle_redis"



=== TEST 18: duplicate throttle_redis name
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_redis main server=127.0.0.1:6380;
--- must_die
duplicate "throttle_redis" "main"



=== TEST 19: a name with odd characters
--- http_config
throttle_redis "a b" server=127.0.0.1:6379;
--- must_die
invalid name "a b" in "throttle_redis"



=== TEST 20: sync=async with a sync_interval out of range
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=async sync_interval=5ms;
--- must_die
invalid parameter "sync_interval=5ms" in "throttle_zone": use a time from 10ms to 60s



=== TEST 20a: a sliding_log cannot sync=async
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m algorithm=sliding_log redis=main sync=async;
--- must_die
"throttle_zone" "z": "algorithm=sliding_log" cannot "sync=async"; use sync=strict, or sliding_window



=== TEST 21: sync=bogus
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync=bogus;
--- must_die
invalid parameter "sync=bogus" in "throttle_zone"



=== TEST 22: sync= without redis=
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m sync=strict;
--- must_die
"throttle_zone" "z": "sync=" needs "redis="



=== TEST 23: sync_interval= on a zone
--- http_config
throttle_redis main server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m redis=main sync_interval=100ms;
--- must_die
sync_interval=
"throttle_zone"



=== TEST 24: tls_verify=maybe
--- http_config
throttle_redis main server=127.0.0.1:6379 tls tls_verify=maybe;
--- must_die
invalid parameter "tls_verify=maybe" in "throttle_redis": use on or off



=== TEST 25: tls_* without tls
--- http_config
throttle_redis main server=127.0.0.1:6379 tls_name=localhost;
--- must_die
"throttle_redis" "main": tls_* parameters need "tls"



=== TEST 26: username= without password=
--- http_config
throttle_redis main server=127.0.0.1:6379 username=alice;
--- must_die
"throttle_redis" "main": "username=alice" needs "password="



=== TEST 27: a trusted certificate file that does not exist
--- http_config
throttle_redis main server=127.0.0.1:6379 tls tls_trusted_certificate=/nonexistent/ca.pem;
--- must_die
/nonexistent/ca.pem



=== TEST 28: a trusted certificate file that does not exist: the message names the directive and the line
--- http_config
throttle_redis main server=127.0.0.1:6379 tls tls_trusted_certificate=/nonexistent/ca.pem;
--- must_die
~ throttle_redis.*/nonexistent/ca\.pem|/nonexistent/ca\.pem.*throttle_redis
~ nginx\.conf:\d+



=== TEST 29: throttle_redis outside http{}
--- config
location / {
    throttle_redis main server=127.0.0.1:6379;
}
--- must_die
"throttle_redis" directive is not allowed here



=== TEST 30: too few arguments
--- http_config
throttle_redis main;
--- must_die
invalid number of arguments in "throttle_redis" directive



=== TEST 31: every parameter at once, and the edge values, are accepted
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT password=p username=u database=0 tls tls_verify=on tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=localhost connect_timeout=1s timeout=1ms keepalive=1 prefix=a:;
throttle_redis other server=localhost:$TEST_REDIS_PORT database=15 keepalive=64 timeout=10s tls tls_verify=off;
throttle_redis plain server=127.0.0.1;
throttle_zone $http_x_key zone=a:1m rate=1r/m redis=main;
throttle_zone $http_x_key zone=b:1m rate=1r/m redis=other sync=strict;
throttle_zone $http_x_key zone=c:1m rate=1r/m redis=plain;
--- config
location / {
    throttle zone=a;
    throttle zone=b;
    throttle zone=c;
}
--- requests
GET /a.txt => 200



=== TEST 32: a backend no zone uses is fine
--- http_config
throttle_redis unused server=127.0.0.1:6379;
throttle_zone $http_x_key zone=z:1m rate=1r/m;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  > X-Key: k



=== TEST 33: throttle_redis may come after the zones that use it
--- redis
redis
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=late;
throttle_redis late server=127.0.0.1:$TEST_REDIS_PORT;
--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED



=== TEST 34: server= with cluster=
--- http_config
throttle_redis main server=127.0.0.1:6379 cluster=127.0.0.1:7000;
--- must_die
"throttle_redis" "main": "cluster=127.0.0.1:7000" cannot be used with "server=



=== TEST 35: cluster= with server= (the other order)
--- http_config
throttle_redis main cluster=127.0.0.1:7000 server=127.0.0.1:6379;
--- must_die
"throttle_redis" "main":
cannot be used with
"server=
"cluster=



=== TEST 36: sentinel= with cluster=
--- http_config
throttle_redis main cluster=127.0.0.1:7000 sentinel=127.0.0.1:26379 master=m;
--- must_die
"throttle_redis" "main":
cannot be used with
"sentinel=
"cluster=



=== TEST 37: sentinel= with server=
--- http_config
throttle_redis main server=127.0.0.1:6379 sentinel=127.0.0.1:26379 master=m;
--- must_die
"throttle_redis" "main":
cannot be used with "server=
"sentinel=



=== TEST 38: database= with cluster=
--- http_config
throttle_redis main cluster=127.0.0.1:7000 database=2;
--- must_die
"throttle_redis" "main": "database=2" cannot be used with "cluster=": a Redis Cluster has database 0 only



=== TEST 39: sentinel= without master=
--- http_config
throttle_redis main sentinel=127.0.0.1:26379;
--- must_die
"throttle_redis" "main": "sentinel=127.0.0.1:26379" needs "master="



=== TEST 40: master= without sentinel=
--- http_config
throttle_redis main server=127.0.0.1:6379 master=mymaster;
--- must_die
"throttle_redis" "main": "master=mymaster" needs "sentinel="



=== TEST 41: master= with cluster=, no sentinel=
--- http_config
throttle_redis main cluster=127.0.0.1:7000 master=mymaster;
--- must_die
"throttle_redis" "main": "master=mymaster" needs "sentinel="



=== TEST 42: max_redirects= without cluster=
--- http_config
throttle_redis main server=127.0.0.1:6379 max_redirects=3;
--- must_die
"throttle_redis" "main": "max_redirects=3" needs "cluster="



=== TEST 43: cluster_refresh= without cluster=
--- http_config
throttle_redis main sentinel=127.0.0.1:26379 master=m cluster_refresh=10s;
--- must_die
"throttle_redis" "main": "cluster_refresh=10s" needs "cluster="



=== TEST 44: sentinel_password= without sentinel=
--- http_config
throttle_redis main cluster=127.0.0.1:7000 sentinel_password=p;
--- must_die
"throttle_redis" "main": "sentinel_password=p" needs "sentinel="



=== TEST 45: sentinel_username= without sentinel=
--- http_config
throttle_redis main server=127.0.0.1:6379 sentinel_username=u;
--- must_die
"sentinel_username=u" needs "sentinel="



=== TEST 46: sentinel_username= without sentinel_password=
--- http_config
throttle_redis main sentinel=127.0.0.1:26379 master=m sentinel_username=u;
--- must_die
"throttle_redis" "main": "sentinel_username=u" needs "sentinel_password="



=== TEST 47: cluster= with a port that is not a number
--- http_config
throttle_redis main cluster=127.0.0.1:7000,127.0.0.1:x;
--- must_die
invalid parameter "cluster=127.0.0.1:7000,127.0.0.1:x" in "throttle_redis": invalid port
~ nginx\.conf:\d+



=== TEST 48: cluster= with an empty element
--- http_config
throttle_redis main cluster=127.0.0.1:7000,,127.0.0.1:7001;
--- must_die
invalid parameter "cluster=127.0.0.1:7000,,127.0.0.1:7001" in "throttle_redis": an empty address



=== TEST 49: cluster= with a trailing comma
--- http_config
throttle_redis main cluster=127.0.0.1:7000,;
--- must_die
invalid parameter "cluster=127.0.0.1:7000," in "throttle_redis": an empty address



=== TEST 50: cluster= empty
--- http_config
throttle_redis main cluster=;
--- must_die
invalid parameter "cluster=" in "throttle_redis": no host



=== TEST 51: cluster= out of range port
--- http_config
throttle_redis main cluster=127.0.0.1:99999;
--- must_die
invalid parameter "cluster=127.0.0.1:99999" in "throttle_redis": invalid port



=== TEST 52: sentinel= with a bad port
--- http_config
throttle_redis main sentinel=127.0.0.1:26379,127.0.0.1:y master=m;
--- must_die
invalid parameter "sentinel=127.0.0.1:26379,127.0.0.1:y" in "throttle_redis": invalid port



=== TEST 53: sentinel= empty
--- http_config
throttle_redis main sentinel= master=m;
--- must_die
invalid parameter "sentinel=" in "throttle_redis": no host



=== TEST 54: max_redirects above 16
--- http_config
throttle_redis main cluster=127.0.0.1:7000 max_redirects=17;
--- must_die
invalid parameter "max_redirects=17" in "throttle_redis": redirections per command, 0 to 16



=== TEST 55: max_redirects not a number
--- http_config
throttle_redis main cluster=127.0.0.1:7000 max_redirects=many;
--- must_die
invalid parameter "max_redirects=many" in "throttle_redis": redirections per command, 0 to 16



=== TEST 56: max_redirects negative
--- http_config
throttle_redis main cluster=127.0.0.1:7000 max_redirects=-1;
--- must_die
invalid parameter "max_redirects=-1" in "throttle_redis"



=== TEST 57: cluster_refresh below 1s
--- http_config
throttle_redis main cluster=127.0.0.1:7000 cluster_refresh=10ms;
--- must_die
invalid parameter "cluster_refresh=10ms" in "throttle_redis": from 1s to 1h



=== TEST 58: cluster_refresh above 1h
--- http_config
throttle_redis main cluster=127.0.0.1:7000 cluster_refresh=61m;
--- must_die
invalid parameter "cluster_refresh=61m" in "throttle_redis": from 1s to 1h



=== TEST 59: cluster_refresh not a time
--- http_config
throttle_redis main cluster=127.0.0.1:7000 cluster_refresh=soon;
--- must_die
invalid parameter "cluster_refresh=soon" in "throttle_redis"



=== TEST 60: master= empty
--- http_config
throttle_redis main sentinel=127.0.0.1:26379 master=;
--- must_die
invalid parameter "master=" in "throttle_redis": a master name



=== TEST 61: good edge cases start: one seed, an IPv6 seed among several, max_redirects/cluster_refresh at their bounds, cluster= with tls and a password, sentinel= with every parameter; nothing answers there: throttle_on_error
--- redis
closed
tls
--- http_config
throttle_redis one cluster=127.0.0.1:$TEST_REDIS_PORT connect_timeout=100ms;
throttle_redis v6 cluster=[::1]:7000,127.0.0.1:$TEST_REDIS_PORT,localhost:7002 max_redirects=0 cluster_refresh=1s connect_timeout=100ms;
throttle_redis bounds cluster=127.0.0.1:7000 max_redirects=16 cluster_refresh=1h;
throttle_redis tls cluster=127.0.0.1:$TEST_REDIS_PORT_2 password=p username=u tls tls_verify=on tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=localhost connect_timeout=100ms keepalive=4 prefix=c: max_redirects=5 cluster_refresh=10s;
throttle_redis watched sentinel=127.0.0.1:$TEST_REDIS_PORT,[::1]:26380 master=mymaster sentinel_username=w sentinel_password=watch password=p username=u database=3 connect_timeout=100ms keepalive=2 prefix=s:;
throttle_redis watched_tls sentinel=127.0.0.1:26379 master=m tls tls_verify=off sentinel_password=x;
throttle_zone $http_x_key zone=one:1m rate=1r/m burst=0 redis=one;
throttle_zone $http_x_key zone=v6:1m rate=1r/m burst=0 redis=v6;
throttle_zone $http_x_key zone=tls:1m rate=1r/m burst=0 redis=tls;
throttle_zone $http_x_key zone=watched:1m rate=1r/m burst=0 redis=watched;
--- config
add_header X-Status $throttle_status always;
location = /one { throttle zone=one; empty_gif; }
location = /v6 { throttle zone=v6; empty_gif; }
location = /tls { throttle zone=tls; empty_gif; }
location = /watched { throttle zone=watched; empty_gif; }
--- requests
GET /one => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
GET /v6 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
GET /tls => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
GET /watched => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
