# The Redis test harness itself (t/lib/RedisServer.pm and the runner's
# --- redis section, perl steps, "time <" and "poll"), against real
# redis-server processes. Uses local zones only, so it runs whatever the
# module's Redis support.

use strict;
use warnings;

use Test::More;
use RedisServer;
use ThrottleTest;

plan skip_all => 'redis-server is not installed (apt-get install redis-server)'
    unless RedisServer::available();

run_blocks();

__DATA__

=== TEST 1: servers start on their own ports, substituted into the config
--- redis
redis
redis: requirepass s3cret
--- config
location / {
    add_header X-Redis-1 $TEST_REDIS_PORT always;
    add_header X-Redis-2 $TEST_REDIS_PORT_2 always;
}
--- requests
GET /a.txt => 200
  X-Redis-1 ~ ^\d+$
  X-Redis-2 ~ ^\d+$
perl {
    my $res = request('/a.txt');
    is(header($res, 'X-Redis-1'), $redis->port, "$name: first port");
    is(header($res, 'X-Redis-2'), $redis2->port, "$name: second port");
    isnt($redis->port, $redis2->port, "$name: distinct ports");
    is($redis->cmd('PING'), 'PONG', "$name: PING");
    # the harness user gets in; the default user needs the password
    my $c = RedisServer::Client->new(port => $redis2->port);
    like('' . $c->cmd('GET', 'x'), qr/NOAUTH/, "$name: requirepass holds");
    is($c->cmd('AUTH', 's3cret'), 'OK', "$name: password accepted");
    $c->close;
}



=== TEST 2: INFO commandstats counts calls
--- redis
redis
--- requests
perl {
    is($redis->calls('evalsha'), 0, "$name: no EVALSHA yet");
    $redis->cmd('SET', "k$_", $_) for 1 .. 5;
    is($redis->calls('set'), 5, "$name: five SETs counted");
    my $sha = $redis->cmd('SCRIPT', 'LOAD', 'return 1');
    $redis->cmd('EVALSHA', $sha, 0) for 1 .. 3;
    is($redis->calls('evalsha'), 3, "$name: three EVALSHAs counted");
    $redis->cmd('EVALSHA', 'f' x 40, 0);
    is($redis->calls('evalsha'), 4, "$name: a NOSCRIPT is a call");
    is($redis->scripts_run, 3, "$name: ... but not a script run");
    $redis->cmd('EVAL', 'return 1', 0);
    is($redis->scripts_run, 4, "$name: EVAL runs count");
    is($redis->script_calls, 5, "$name: script_calls: 4 EVALSHA + 1 EVAL");
    is(join(',', $redis->keys_matching('k*')), 'k1,k2,k3,k4,k5',
       "$name: SCAN");
    my $db3 = RedisServer::Client->new(port => $redis->port,
        user => $RedisServer::ADMIN_USER, pass => $RedisServer::ADMIN_PASS);
    $db3->cmd('SELECT', 3);
    $db3->cmd('SET', 'in3', 1);
    is(join(',', $redis->keys_matching('in*', 3)), 'in3', "$name: SCAN db 3");
    is(join(',', $redis->keys_matching('in*')), '', "$name: not in db 0");
}



=== TEST 3: SIGSTOP stalls (bounded reads), SIGCONT resumes, restart keeps the port and empties the data
--- redis
redis
--- requests
perl {
    $redis->cmd('SET', 'k', 'v');
    my $port = $redis->port;
    $redis->pause;
    my $c = RedisServer::Client->new(port => $port, timeout => 0.2);
    my $t0 = time;
    ok(!eval { $c->cmd('PING'); 1 }, "$name: no answer while stopped");
    cmp_ok(time - $t0, '<', 1, "$name: the read gave up in time");
    $redis->resume;
    is($redis->cmd('GET', 'k'), 'v', "$name: answers again after SIGCONT");
    my $pid = $redis->pid;
    $redis->restart;
    is($redis->port, $port, "$name: same port after restart");
    isnt($redis->pid, $pid, "$name: a new process");
    is($redis->cmd('GET', 'k'), undef, "$name: data gone after restart");
    $redis->stop;
    ok(!eval { RedisServer::Client->new(port => $port, timeout => 0.5); 1 },
       "$name: refused once stopped");
    $redis->restart;
    is($redis->cmd('PING'), 'PONG', "$name: restarted after a stop");
}



=== TEST 4: TLS: redis-cli with the CA gets in, with the other CA it does not
--- redis
tls
--- requests
perl {
    my $t = $redis->tls;
    ok(-f $t->{$_}, "$name: $_ made") for qw(ca cert key other_ca);
    is($redis->cmd('SET', 'tk', 'v'), 'OK', "$name: SET over TLS");
    is(join(',', $redis->keys_matching('tk')), 'tk', "$name: SCAN over TLS");
    ok(!eval { RedisServer::Client->new(port => $redis->port, timeout => 1)
                   ->cmd('PING') eq 'PONG' },
       "$name: plain text is not answered on the TLS port");
    my ($rc, $out) = RedisServer::run_cmd([
        $RedisServer::CLI, '--tls', '--cacert', $t->{other_ca},
        '-p', $redis->port, 'PING']);
    unlike($out, qr/PONG/, "$name: the unrelated CA is refused");
    like($out, qr/verif|certificate/i, "$name: ... for a certificate reason");
    ($rc, $out) = RedisServer::run_cmd(['openssl', 'verify', '-CAfile',
                                        $t->{ca}, $t->{cert}]);
    like($out, qr/OK/, "$name: the server cert chains to the CA");
    ($rc, $out) = RedisServer::run_cmd(['openssl', 'x509', '-noout', '-text',
                                        '-in', $t->{cert}]);
    like($out, qr/DNS:localhost/, "$name: SAN DNS:localhost");
    like($out, qr/IP Address:127\.0\.0\.1/, "$name: SAN IP 127.0.0.1");
}



=== TEST 5: ACL user from the conf lines
--- redis
redis: user alice on >secret ~* &* +@all; user bob on >pw ~* &* +@all -@scripting
--- requests
perl {
    my $c = RedisServer::Client->new(port => $redis->port,
                                     user => 'alice', pass => 'secret');
    is($c->cmd('SET', 'a', 1), 'OK', "$name: alice can write");
    ok(!eval { RedisServer::Client->new(port => $redis->port,
                                        user => 'alice', pass => 'wrong'); 1 },
       "$name: a wrong password is refused");
    like($@, qr/WRONGPASS/, "$name: ... with WRONGPASS");
    my $b = RedisServer::Client->new(port => $redis->port,
                                     user => 'bob', pass => 'pw');
    like('' . $b->cmd('EVAL', 'return 1', 0), qr/NOPERM/,
         "$name: bob may not run scripts (a real error reply)");
    is($redis->scripts_run, 0, "$name: a rejected EVAL is no script run");
    is($redis->script_calls, 1, "$name: ... but a script call received");
}



=== TEST 6: fakes: garbage, silence, a closed port
--- redis
fake garbage
fake silent
closed
--- requests
perl {
    my $g = RedisServer::Client->new(port => $redis[0]->port, timeout => 1);
    ok(!eval { $g->cmd('PING'); 1 }, "$name: garbage is not RESP");
    like($@, qr/bad RESP/, "$name: ... as the client says");
    my $s = RedisServer::Client->new(port => $redis[1]->port, timeout => 0.2);
    my $t0 = time;
    ok(!eval { $s->cmd('PING'); 1 }, "$name: silence");
    cmp_ok(time - $t0, '<', 1, "$name: ... bounded");
    ok(!eval { RedisServer::Client->new(port => $redis[2]->port,
                                        timeout => 1); 1 },
       "$name: nothing listens on the closed port");
}



=== TEST 7: fakes that speak RESP with the wrong replies
--- redis
fake ok
fake short
--- requests
perl {
    my $ok = RedisServer::Client->new(port => $redis->port, timeout => 1);
    is($ok->cmd('AUTH', 'x', 'y'), 'OK', "$name: ok: AUTH");
    is($ok->cmd('EVALSHA', 'f' x 40, 1, 'k'), 'OK', "$name: ok: EVALSHA");
    # two commands in one write: two replies
    $ok->send_raw(RedisServer::Client::encode('PING')
                  . RedisServer::Client::encode('SELECT', 3));
    is($ok->read_reply . $ok->read_reply, 'OKOK', "$name: ok: pipelined");
    my $short = RedisServer::Client->new(port => $redis2->port, timeout => 1);
    is($short->cmd('SELECT', 1), 'OK', "$name: short: SELECT");
    is_deeply($short->cmd('EVALSHA', 'f' x 40, 1, 'k'), [0, 1],
              "$name: short: EVALSHA gets two integers");
}



=== TEST 8: time < and poll, with a local zone
--- http_config
throttle_zone k zone=z:1m rate=10r/s burst=0;
--- config
location / {
    throttle zone=z;
}
--- requests
GET /a.txt => 200
  time < 1
GET /a.txt => 429
# the key drains within 0.1 s: a poll gets a 200 again
GET /a.txt => 200 poll 2
  RateLimit: "z";r=0;t=1
perl {
    $stash{n} = 1;
}
perl: is($stash{n}, 1, "$name: stash kept across steps");
perl {
    my $t0 = time;
    my $ok = wait_until(0.3, sub { 0 });
    ok(!$ok, "$name: wait_until gives up");
    cmp_ok(time - $t0, '<', 1, "$name: ... in time");
}
