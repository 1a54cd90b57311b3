# SPDX-License-Identifier: BSD-2-Clause
# TLS to Redis: a redis-server with only a TLS port and a certificate for
# localhost / 127.0.0.1 made at test time by a test CA. Verified by default
# against tls_trusted_certificate and tls_name (default: the host of
# server=); an unrelated CA or a wrong name is refused (logged, handled by
# throttle_on_error); tls_verify=off connects anyway.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): the server{} of a block with none of its own:
zone z on every location, its $throttle_status as X-Status.

--- config
location / {
    throttle zone=z;
    add_header X-Status $throttle_status always;
}


=== TEST 1: tls with the test CA and tls_name=localhost: Redis decides
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=localhost;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=0;t=120
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in the TLS Redis");
    like($redis->cmd('PTTL', 'throttle:z:{k}'), qr/^[1-9]\d*$/,
         "$name: with a TTL");
}
--- no_error_log
throttle redis



=== TEST 2: the default name is the host of server=: 127.0.0.1 matches the certificate's IP entry
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in the TLS Redis");
}
--- no_error_log
throttle redis



=== TEST 3: server=localhost: the default name localhost matches
--- redis
tls
--- http_config
throttle_redis main server=localhost:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200 poll 2
  > X-Key: k
  X-Status: PASSED
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in the TLS Redis");
}



=== TEST 4: a certificate from an unrelated CA is refused: logged, allow / deny
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/other-ca.pem tls_name=localhost timeout=100ms connect_timeout=200ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z;
    throttle_on_error deny;
}
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.5
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.5
perl {
    is(join(' ', $redis->keys_matching('*')), '', "$name: nothing written");
}
--- error_log
~ \[error\] .*throttle redis "main".*(?i:verif|certificate)



=== TEST 5: tls_name=wrong.example is refused: logged, allowed
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=wrong.example timeout=100ms connect_timeout=200ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.5
perl {
    is(join(' ', $redis->keys_matching('*')), '', "$name: nothing written");
}
--- error_log
~ \[error\] .*throttle redis "main".*(?i:verif|certificate|name)
wrong.example



=== TEST 6: tls_verify=off: the unrelated CA and the wrong name are accepted
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_verify=off tls_trusted_certificate=$TEST_REDIS_TLS_DIR/other-ca.pem tls_name=wrong.example;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in the TLS Redis");
}
--- no_error_log
throttle redis



=== TEST 7: TLS with an ACL user and a database
--- redis
tls: user alice on >secret ~* &* +@all
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=localhost username=alice password=secret database=5;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is(join(' ', $redis->keys_matching('*', 5)), 'throttle:z:{k}',
       "$name: the key is in db 5");
    like($redis->cmd('CLIENT', 'LIST'), qr/\buser=alice\b/,
         "$name: connected as alice");
}



=== TEST 8: tls to a plain-text Redis: the handshake fails, bounded, logged
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_verify=off timeout=100ms connect_timeout=200ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- config
location / {
    throttle zone=z;
    throttle_on_error deny;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.6
--- error_log
~ \[error\] .*throttle redis "main"



=== TEST 9: plain text to a TLS-only port: no answer that makes sense, bounded
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
--- error_log
~ \[error\] .*throttle redis "main"



=== TEST 10: TLS Redis restarted: decisions resume over a new handshake
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/ca.pem tls_name=localhost;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=3 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
perl: $redis->restart;
GET /a.txt => 200 poll 5
  > X-Key: k2
  X-Status: PASSED
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k2}',
       "$name: the restarted Redis has the new key");
}



=== TEST 11: TLS failures are not flooded into the log: untrusted certificate
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_trusted_certificate=$TEST_REDIS_TLS_DIR/other-ca.pem tls_name=localhost timeout=100ms connect_timeout=200ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
perl {
    my $f = flood(2.5, 4, 'GET /a.txt', 'k');
    is_deeply($f->{status}, { ERROR_ALLOWED => $f->{total} },
              "$name: $f->{total} x ERROR_ALLOWED");
    cmp_ok($f->{max}, '<', 0.5, "$name: the slowest in < 0.5 s");
    log_rate_ok($name, $f);
}



=== TEST 12: TLS failures are not flooded into the log: plain text to the TLS port (connection reset)
--- redis
tls
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
perl {
    my $f = flood(2.5, 4, 'GET /a.txt', 'k');
    is_deeply($f->{status}, { ERROR_ALLOWED => $f->{total} },
              "$name: $f->{total} x ERROR_ALLOWED");
    cmp_ok($f->{max}, '<', 0.4, "$name: the slowest in < 0.4 s");
    log_rate_ok($name, $f);
}



=== TEST 13: a TLS handshake that never completes: the request still gets on_error within timeout
--- redis
fake silent
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT tls tls_verify=off timeout=100ms connect_timeout=1s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
# the handshake times out after connect_timeout (1 s)
perl {
    ok(wait_until(3, sub { error_log() =~ /\[error\] .*throttle redis "main"/ }),
       "$name: the stalled handshake is logged");
}
