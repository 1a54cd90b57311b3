# SPDX-License-Identifier: BSD-2-Clause
# Redis cannot answer: refused, stopped (SIGSTOP), killed, garbage, silence,
# an error reply. throttle_on_error decides (allow: ERROR_ALLOWED, deny:
# throttle_status with ERROR_DENIED), every request is answered within the
# timeout plus a margin, decisions resume once Redis is back without a
# reload, and the error log is not flooded.
#
# timeout=100ms here; "time < 0.4" is the timeout plus 300 ms for this
# slow machine.

use ThrottleTest;
require_redis_module();
run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): the server{} of a block with none of its own:
zone z limits /a.txt, its $throttle_status as X-Status.

--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=z;
}


=== TEST 1: connection refused: allow, deny, deny with another status; answered at once
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
add_header X-Status $throttle_status always;
add_header X-Remaining $throttle_remaining always;
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z;
    throttle_on_error deny;
}
location = /index.html {
    throttle zone=z;
    throttle_on_error deny;
    throttle_status 503;
}
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  no RateLimit
  no Retry-After
  no X-Remaining
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  no Retry-After
  time < 0.4
GET /index.html => 503
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
# an empty key needs no decision
GET /b.txt => 200
  X-Status: PASSED
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): Connection refused



=== TEST 2: SIGSTOP: requests get on_error within the timeout; after SIGCONT decisions resume without a reload
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
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
GET /a.txt => 200
  > X-Key: before
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
perl: $redis->pause;
GET /a.txt x3 => 200
  > X-Key: k1
  X-Status: ERROR_ALLOWED
  no RateLimit
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k1
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    # many at once, on both workers: each answered within the bound
    my @res = parallel_requests(20, 'GET /a.txt', 'X-Key' => 'k2');
    my %st = map { (header($_, 'X-Status') // 'none') => 1 } @res;
    is(join(',', sort keys %st), 'ERROR_ALLOWED',
       "$name: 20 at once while stopped: all ERROR_ALLOWED");
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @res;
    cmp_ok($max, '<', 0.4, "$name: 20 at once: the slowest in < 0.4 s");
}
perl {
    $redis->resume;
    my $t0 = time;
    # probed with keys of their own: what the stalled Redis read meanwhile
    # (and a probe that timed out) may have been counted
    my $i = 0;
    ok(wait_until(5, sub {
        my $r = request('/a.txt', 'X-Key' => 'probe' . $i++);
        (header($r, 'X-Status') // '') eq 'PASSED';
    }), "$name: decisions resume");
    my $took = time - $t0;
    cmp_ok($took, '<', 5, "$name: decisions resumed ${\ sprintf '%.2f', $took } s after SIGCONT");
    ok($redis->cmd('EXISTS', 'throttle:z:{probe' . ($i - 1) . '}'),
       "$name: ... by Redis (the key is there)");
}
# each worker reconnects on its own: poll (a request that gets an error at
# once, in the backoff, sends nothing)
GET /a.txt => 200 poll 3
  > X-Key: after
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
GET /a.txt => 200 poll 3
  > X-Key: before
  X-Status: PASSED
  RateLimit: "z";r=8;t={120-}
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): no reply within 100 ms



=== TEST 3: Redis killed, then started again on the same port: errors at once, then decisions resume
--- redis
redis
--- http_config
# killed: refused at once, whatever the timeout; back: a call that timed
# out on a busy machine may still have been counted, which the exact
# counts below cannot allow, hence 1 s
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- config
add_header X-Status $throttle_status always;
add_header X-Pid $pid always;
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z;
    throttle_on_error deny;
}
--- requests
GET /a.txt x2 => 200
  > X-Key: k
  X-Status: PASSED
perl: $redis->kill_hard;
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    # 3 s down with requests coming: the reconnect backoff grows to its cap
    my ($t0, $max, %st) = (time);
    while (time - $t0 < 3) {
        for my $res (parallel_requests(2, 'GET /a.txt', 'X-Key' => 'k')) {
            $st{ header($res, 'X-Status') // 'none' }++;
            $max = $res->{elapsed} if !$max || $res->{elapsed} > $max;
        }
        sleep 0.05;
    }
    is(join(',', sort keys %st), 'ERROR_ALLOWED',
       "$name: 3 s down: all ERROR_ALLOWED");
    cmp_ok($max, '<', 0.4, "$name: 3 s down: the slowest in < 0.4 s");
}
perl {
    $redis->restart;
    my $t0 = time;
    # probed with keys of their own (a probe that times out may still have
    # been counted by Redis) until both workers decide again: each
    # reconnects on its own, after its backoff
    my ($i, %deciding) = (0);
    ok(wait_until(5, sub {
        my $r = request('/a.txt', 'X-Key' => 'probe' . $i++);
        $deciding{ header($r, 'X-Pid') } = 1
            if (header($r, 'X-Status') // '') eq 'PASSED';
        keys %deciding == 2;
    }, 0.02), "$name: decisions resume in both workers");
    my $took = time - $t0;
    # the backoff is capped at about 1-2 s
    cmp_ok($took, '<', 3, "$name: decisions resumed ${\ sprintf '%.2f', $took } s after the restart");
    $stash{k} = $redis->cmd('GET', 'throttle:z:{k}');
    is($stash{k}, undef, "$name: the new Redis has no state for k yet")
        or diag(sprintf "k's TAT is %.1f s ahead; %s", ($stash{k} - $redis->time_us) / 1e6,
                $redis->cmd('INFO', 'commandstats'));
}
# the new Redis started empty: k is fresh there, in either worker
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
GET /b.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=8;t=120



=== TEST 4: the error log is not flooded: 2.5 s of refused requests, about a line per second per worker
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
perl {
    my $f = flood(2.5, 4, 'GET /a.txt', 'k');
    cmp_ok($f->{total}, '>=', 200, "$name: $f->{total} requests sent");
    is_deeply($f->{status}, { ERROR_ALLOWED => $f->{total} },
              "$name: all ERROR_ALLOWED");
    cmp_ok($f->{max}, '<', 0.4, "$name: the slowest in < 0.4 s");
    log_rate_ok($name, $f);
}



=== TEST 5: the error log is not flooded while Redis is stopped (SIGSTOP) either
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: warm
  X-Status: PASSED
perl {
    $redis->pause;
    my $f = flood(2.5, 10, 'GET /a.txt', 'r');
    $redis->resume;
    is_deeply($f->{status}, { ERROR_ALLOWED => $f->{total} },
              "$name: $f->{total} x ERROR_ALLOWED");
    cmp_ok($f->{max}, '<', 0.4, "$name: the slowest in < 0.4 s");
    log_rate_ok($name, $f);
}



=== TEST 6: a server that answers garbage
--- redis
fake garbage
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
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
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): protocol error



=== TEST 7: a server that accepts and never answers: the timeout holds
--- redis
fake silent
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=200ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
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
perl {
    my $res = request('/a.txt', 'X-Key' => 'first');
    is($res->{status}, 200, "$name: first request: 200");
    is(header($res, 'X-Status'), 'ERROR_ALLOWED', "$name: ... ERROR_ALLOWED");
    cmp_ok($res->{elapsed}, '>=', 0.15,
           "$name: ... after waiting for the 200ms timeout");
    cmp_ok($res->{elapsed}, '<', 0.5, "$name: ... not much longer");
}
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.5
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.5
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): no reply within 200 ms



=== TEST 8: an error reply (the user may not run scripts: NOPERM)
--- redis
redis: user bob on >pw ~* &* +@all -@scripting
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT username=bob password=pw timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
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
  time < 0.4
GET /b.txt x3 => 429
  > X-Key: k
  X-Status: ERROR_DENIED
  time < 0.4
perl {
    is(join(' ', $redis->keys_matching('*')), '', "$name: nothing written");
}
--- error_log
~ \[error\] .*throttle zone "z": Redis answered: NOPERM



=== TEST 9: dry run never rejects, even with on_error deny
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location = /a.txt {
    throttle zone=z;
    throttle_on_error deny;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt x2 => 200
  > X-Key: k
  X-Status ~ ^ERROR_
  time < 0.4



=== TEST 10: a strict zone whose Redis is down and a local zone: allow lets the request through, the local zone still decides
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone k zone=strict:1m rate=1r/m burst=9 redis=main;
throttle_zone k zone=local:1m rate=1r/m burst=1;
--- config
location = /a.txt {
    throttle zone=strict;
    throttle zone=local;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt x2 => 200
  time < 0.4
GET /a.txt => 429
  RateLimit-Policy: "local";q=2;w=120
  time < 0.4



=== TEST 11: error replies are not flooded into the log either
--- redis
redis: user bob on >pw ~* &* +@all -@scripting
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT username=bob password=pw timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
perl {
    my $f = flood(2.5, 4, 'GET /a.txt', 'k');
    is_deeply($f->{status}, { ERROR_ALLOWED => $f->{total} },
              "$name: $f->{total} x ERROR_ALLOWED");
    cmp_ok($f->{max}, '<', 0.4, "$name: the slowest in < 0.4 s");
    log_rate_ok($name, $f);
}



=== TEST 12: the default timeout is 50ms
--- redis
fake silent
--- default_timeout
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
perl {
    my $res = request('/a.txt', 'X-Key' => 'first');
    is(header($res, 'X-Status'), 'ERROR_ALLOWED', "$name: ERROR_ALLOWED");
    cmp_ok($res->{elapsed}, '>=', 0.04, "$name: after waiting about 50 ms");
    cmp_ok($res->{elapsed}, '<', 0.35, "$name: not much longer");
}
--- error_log
no reply within 50 ms



=== TEST 13: the client goes away while its request waits for Redis; the late reply is dropped safely
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=2s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: warm
  X-Status: PASSED
perl {
    $redis->pause;
    # 10 requests wait for the stopped Redis; their clients hang up
    my @socks;
    for my $i (1 .. 10) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
            PeerPort => $nginx->{port}, Proto => 'tcp', Timeout => 2)
            or die "connect: $!";
        syswrite $s, "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Key: gone$i\r\n"
                   . "Connection: close\r\n\r\n";
        push @socks, $s;
    }
    ok(all_read(), "$name: the 10 requests wait for Redis");
    # (nginx does not watch a client while the access phase waits)
    close $_ for @socks;
    $redis->resume;    # the replies come back for requests that are gone
    ok(all_closed(), "$name: nginx answers them, to no one, and closes");
}
GET /a.txt => 200 poll 3
  > X-Key: after
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
GET /a.txt => 200
  > X-Key: warm
  X-Status: PASSED
  RateLimit: "z";r=8;t={120-}



=== TEST 14: replies that are RESP but not the script's (+OK, a short array)
--- redis
fake ok
fake short
--- http_config
throttle_redis ok server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms password=x database=1;
throttle_redis short server=127.0.0.1:$TEST_REDIS_PORT_2 timeout=100ms;
throttle_zone $http_x_key zone=a:1m rate=1r/m burst=0 redis=ok;
throttle_zone $http_x_key zone=b:1m rate=1r/m burst=0 redis=short;
--- config
add_header X-Status $throttle_status always;
location = /a.txt {
    throttle zone=a;
}
location = /b.txt {
    throttle zone=b;
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
  no Retry-After
  time < 0.4
--- error_log
~ \[error\] .*throttle zone "a"
~ \[error\] .*throttle zone "b"



=== TEST 15: Redis closes idle connections (its "timeout 1"): the next request is decided, not an error
--- redis
redis: timeout 1
--- http_config
# the next request reconnects: 1 s, so that only a real failure, not a
# busy machine, makes it an error
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=9;t=60
perl {
    # idle for 1 s, then closed at Redis's next check (ten a second)
    my @nginx;
    ok(wait_until(5, sub {
        @nginx = grep { !/\buser=harness\b/ } split /\n/, $redis->cmd('CLIENT', 'LIST');
        !@nginx;
    }), "$name: Redis closed nginx's idle connections") or diag(join "\n", @nginx);
    ok(wait_until(5, sub { !Processes::closed_by_peer($redis->port) }),
       "$name: nginx closes its ends");
}
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=8;t={120-}
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
--- no_error_log
~ \[error\] .*throttle redis



=== TEST 16: CLIENT KILL of nginx's connections: the next request is decided, not an error
--- redis
redis
--- http_config
# the next request reconnects: 1 s, so that only a real failure, not a
# busy machine, makes it an error
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
perl {
    my $killed = $redis->cmd('CLIENT', 'KILL', 'USER', 'default');
    cmp_ok($killed, '>=', 1, "$name: $killed connection(s) killed");
    ok(wait_until(5, sub { !Processes::closed_by_peer($redis->port) }),
       "$name: nginx closes its ends");
}
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "z";r=8;t={120-}
--- no_error_log
~ \[error\] .*throttle redis



=== TEST 17: reload while requests wait for a stopped Redis: every request is answered, no crash
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: warm
  X-Status: PASSED
perl {
    $redis->pause;
    my @socks;
    for my $i (1 .. 6) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
            PeerPort => $nginx->{port}, Proto => 'tcp', Timeout => 2)
            or die "connect: $!";
        syswrite $s, "GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Key: w$i\r\n"
                   . "Connection: close\r\n\r\n";
        push @socks, $s;
    }
    ok(all_read(), "$name: the 6 requests wait for Redis");
    # nginx -s reload with the same configuration
    my ($rc, $out) = ThrottleTest::nginx_cmd($nginx, '-s', 'reload');
    is($rc, 0, "$name: nginx -s reload") or diag($out);
    ok(wait_until(5, sub { (() = error_log() =~ /gracefully shutting down/g) >= 2 }),
       "$name: the old workers are told to quit while the requests wait");
    $redis->resume;
    my %st;
    for my $s (@socks) {
        my $res = ThrottleTest::http_read($s, { method => 'GET' });
        $st{ $res->{status} // "none: $res->{error}" }++;
        close $s;
    }
    is_deeply(\%st, { 200 => 6 }, "$name: the 6 waiting requests answered");
    ok(wait_until(5, sub {
        my $r = request('/a.txt', 'X-Key' => 'after');
        (header($r, 'X-Status') // '') eq 'PASSED';
    }), "$name: the new workers decide through Redis");
}



=== TEST 18: while Redis is down, cached denials still reject (they are exact); other keys get on_error
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: k
GET /a.txt => 429
  > X-Key: k
  X-Status: REJECTED
perl: $redis->kill_hard;
GET /a.txt x3 => 429
  > X-Key: k
  X-Status: REJECTED
  Retry-After: {60-}
  time < 0.4
GET /a.txt x2 => 200
  > X-Key: other
  X-Status: ERROR_ALLOWED
  time < 0.4



=== TEST 19: requests answered during an outage are not sent to Redis once it is back
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main;
--- requests
GET /a.txt => 200
  > X-Key: warm
  X-Status: PASSED
perl {
    $redis->kill_hard;
    my $t0 = time;
    my %st;
    while (time - $t0 < 3) {
        $st{ header($_, 'X-Status') // 'none' }++
            for parallel_requests(2, 'GET /a.txt', 'X-Key' => 'down');
        sleep 0.02;
    }
    is(join(',', sort keys %st), 'ERROR_ALLOWED', "$name: all ERROR_ALLOWED while down");
    $redis->restart;
    # recovery, probed with keys of their own
    my $i = 0;
    ok(wait_until(5, sub {
        my $r = request('/a.txt', 'X-Key' => 'probe' . $i++);
        (header($r, 'X-Status') // '') eq 'PASSED';
    }), "$name: decisions resume");
    sleep 1.5;    # any queued command would have been sent by now
    is($redis->cmd('GET', 'throttle:z:{down}'), undef,
       "$name: nothing charged the key used only during the outage");
}



=== TEST 20: a reply announcing two billion elements is refused at once, not allocated
--- redis
fake huge
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- requests
GET /a.txt x3 => 200
  > X-Key: k
  X-Status: ERROR_ALLOWED
  time < 0.4
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): protocol error: an array longer than any script's reply
