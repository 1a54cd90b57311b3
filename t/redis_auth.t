# SPDX-License-Identifier: BSD-2-Clause
# AUTH and SELECT: an ACL user (username= password=), requirepass
# (password= alone), wrong or missing credentials (logged clearly, handled
# by throttle_on_error), database=N.

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


=== TEST 1: an ACL user: username=alice password=secret
--- redis
redis: user alice on >secret ~* &* +@all; user default off
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT username=alice password=secret;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=1;t=60
GET /a.txt => 200
  > X-Key: k
  RateLimit: "z";r=0;t=120
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in Redis");
    my $clients = $redis->cmd('CLIENT', 'LIST');
    like($clients, qr/\buser=alice\b/, "$name: nginx is connected as alice");
}



=== TEST 2: an ACL user with a wrong password: WRONGPASS logged, on_error applies
--- redis
redis: user alice on >secret ~* &* +@all; user default off
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT username=alice password=wrong timeout=100ms;
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
  no RateLimit
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    is(join(' ', $redis->keys_matching('*')), '', "$name: nothing written");
    is($redis->scripts_run, 0, "$name: no EVALSHA got through");
}
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): AUTH failed: WRONGPASS



=== TEST 3: requirepass with password= alone
--- redis
redis: requirepass s3cret
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT password=s3cret;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl {
    is(join(' ', $redis->keys_matching('*')), 'throttle:z:{k}',
       "$name: the key is in Redis");
}



=== TEST 4: requirepass, wrong password: logged, allowed
--- redis
redis: requirepass s3cret
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT password=nope timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): AUTH failed: WRONGPASS



=== TEST 5: requirepass and no password= at all: NOAUTH logged, denied on deny
--- redis
redis: requirepass s3cret
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
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
  time < 0.4
--- error_log
~ \[error\] .*throttle zone "z": Redis answered: NOAUTH



=== TEST 6: database=3 puts the keys in db 3
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT database=3;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
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
perl {
    is(join(' ', $redis->keys_matching('*', 3)), 'throttle:z:{alice}',
       "$name: the key is in db 3");
    is(join(' ', $redis->keys_matching('*', 0)), '', "$name: nothing in db 0");
    my $c = RedisServer::Client->new(port => $redis->port,
        user => $RedisServer::ADMIN_USER, pass => $RedisServer::ADMIN_PASS);
    $c->cmd('SELECT', 3);
    cmp_ok($c->cmd('PTTL', 'throttle:z:{alice}'), '>', 0,
           "$name: with a TTL");
    $c->close;
}



=== TEST 7: two backends: different databases and credentials, one zone each
--- redis
redis: user alice on >secret ~* &* +@all
--- http_config
throttle_redis one server=127.0.0.1:$TEST_REDIS_PORT database=1;
throttle_redis two server=127.0.0.1:$TEST_REDIS_PORT database=2 username=alice password=secret prefix=t2:;
throttle_zone $http_x_key zone=a:1m rate=1r/m burst=1 redis=one;
throttle_zone $http_x_key zone=b:1m rate=1r/m burst=1 redis=two;
--- config
location = /a.txt {
    throttle zone=a;
}
location = /b.txt {
    throttle zone=b;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit: "a";r=1;t=60
GET /b.txt => 200
  > X-Key: k
  RateLimit: "b";r=1;t=60
perl {
    is(join(' ', $redis->keys_matching('*', 1)), 'throttle:a:{k}',
       "$name: zone a in db 1");
    is(join(' ', $redis->keys_matching('*', 2)), 't2:b:{k}',
       "$name: zone b in db 2, with its prefix");
    like($redis->cmd('CLIENT', 'LIST'), qr/\buser=alice\b/,
         "$name: backend two connects as alice");
}



=== TEST 8: a database the server does not have: logged, on_error applies
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT database=99 timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1 redis=main;
--- requests
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
--- error_log
~ \[error\] .*throttle redis "main".*(?i:DB index is out of range)
