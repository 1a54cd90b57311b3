# SPDX-License-Identifier: BSD-2-Clause
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



=== TEST 9: a cluster forms: 3 masters with a replica each, every node agrees; keys live on the master CLUSTER KEYSLOT says; the seeds reach the config
--- redis
cluster
--- config
location / {
    add_header X-Seeds "$TEST_REDIS_CLUSTER" always;
}
--- requests
perl {
    my @m = $cluster->masters;
    my @r = $cluster->replicas;
    is(scalar @m, 3, "$name: 3 masters");
    is(scalar @r, 3, "$name: 3 replicas");
    ok($cluster->stable, "$name: cluster_state:ok everywhere, one slot map");
    is(header(request('/a.txt'), 'X-Seeds'), $cluster->seeds,
       "$name: \$TEST_REDIS_CLUSTER is the seeds");
    like($cluster->seeds, qr/^127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){5}$/,
         "$name: six host:port seeds");
    my @first = map { $cluster->slots_of($_)->[0][0] } @m;
    is("@first", '0 5461 10923', "$name: masters in slot order");
    # keys with known slots (CRC16-XMODEM mod 16384): foo 12182, bar 5061
    is($cluster->slot_of('foo'), 12182, "$name: slot of foo");
    is($cluster->master_index_of_key('bar'), 0, "$name: bar on master 0");
    is($cluster->master_index_of_key('foo'), 2, "$name: foo on master 2");
    my $owner = $cluster->master_of_key('foo');
    is($owner->cmd('SET', 'foo', 1), 'OK', "$name: the owner takes foo");
    like('' . $m[0]->cmd('SET', 'foo', 1), qr/^MOVED 12182 127\.0\.0\.1:${\ $owner->port }$/,
         "$name: another master redirects to it");
    is(join(',', $owner->keys_matching('*')), 'foo', "$name: keys_matching");
    is($cluster->command_counts->[2]{port}, $owner->port, "$name: counts per master");
    $ThrottleTest::Step::kept_seeds = $cluster->seeds;
}



=== TEST 10: the same line: the cluster is kept, emptied; reshard moves the lowest slots, with their keys, blocking or in the background
--- redis
cluster
--- requests
perl {
    is($cluster->seeds, $ThrottleTest::Step::kept_seeds,
       "$name: the same nodes as the last block's");
    is(join(',', map { $_->keys_matching('*') } $cluster->masters), '',
       "$name: emptied (FLUSHALL) since the last block");
    is($cluster->command_counts->[0]{evalsha}, 0, "$name: counts zeroed");
    $cluster->master_of_key('bar')->cmd('SET', 'bar', 'v');    # slot 5061
    $cluster->reshard(from => 0, to => 1, slots => 5100);
    is($cluster->slots_of(($cluster->masters)[0])->[0][0], 5100,
       "$name: master 0 gave away slots 0-5099");
    is($cluster->master_index_of_key('bar'), 1, "$name: bar's slot is on master 1");
    is($cluster->master_of_key('bar')->cmd('GET', 'bar'), 'v', "$name: ... with bar");
    my $job = $cluster->reshard(from => 1, to => 0, slots => 100, background => 1);
    my ($rc, $out) = $cluster->finish($job);
    is($rc, 0, "$name: a background reshard ends") or diag($out);
    is($cluster->slots_of(($cluster->masters)[0])->[0][0], 0,
       "$name: master 0 got back slots 0-99");
    ok($cluster->stable, "$name: the nodes agree afterwards");
}



=== TEST 11: the same line again: kill_master (SIGKILL): its replica takes its slots within node timeout + a few seconds; the cluster is then not kept
--- redis
cluster
--- requests
perl {
    my $before = $cluster->masters;
    my @ports = map { $_->port } $cluster->masters;
    my $dead = $cluster->kill_master(1);
    ok(!$dead->running, "$name: master 1 is gone");
    my $t0 = time;
    ok($cluster->wait_for_failover, "$name: failover");
    my $took = time - $t0;
    cmp_ok($took, '<', $cluster->node_timeout / 1000 + 4,
           sprintf("$name: ... in %.1f s", $took));
    my @now = map { $_->port } $cluster->masters;
    is(scalar @now, 3, "$name: 3 masters again");
    isnt($now[1], $ports[1], "$name: master 1 is a former replica");
    is("@now[0, 2]", "@ports[0, 2]", "$name: the others unchanged");
    ok(!$cluster->intact, "$name: not intact: not kept for another block");
}



=== TEST 12: a TLS cluster with a password: every node TLS only, the default user needs it
--- redis
cluster tls: requirepass s3cret
--- config
location / {
    add_header X-Tls "$TEST_REDIS_TLS_DIR" always;
}
--- requests
perl {
    is(scalar($cluster->masters), 3, "$name: 3 masters");
    is(scalar($cluster->replicas), 3, "$name: 3 replicas (replication over TLS)");
    is(header(request('/a.txt'), 'X-Tls'), $cluster->tls->{dir},
       "$name: \$TEST_REDIS_TLS_DIR");
    my $m = $cluster->master_of_key('foo');
    is($m->cmd('SET', 'foo', 1), 'OK', "$name: SET over TLS");
    ok(!eval { RedisServer::Client->new(port => $m->port, timeout => 1)
                   ->cmd('PING') eq 'PONG' }, "$name: no plain text");
    my ($rc, $out) = Processes::run_cmd([$RedisServer::CLI, '--tls', '--cacert',
        $cluster->tls->{ca}, '-p', $m->port, 'GET', 'foo']);
    like($out, qr/NOAUTH/, "$name: the default user needs the password");
}



=== TEST 13: sentinel: three Sentinels watch the master; SENTINEL FAILOVER makes the replica master, everywhere
--- redis
sentinel
--- config
location / {
    add_header X-Sentinels "$TEST_REDIS_SENTINELS" always;
    add_header X-Master "$TEST_REDIS_MASTER_NAME" always;
}
--- requests
perl {
    my $res = request('/a.txt');
    is(header($res, 'X-Sentinels'), $sentinel->sentinels, "$name: \$TEST_REDIS_SENTINELS");
    like($sentinel->sentinels, qr/^127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}$/,
         "$name: three of them");
    is(header($res, 'X-Master'), 'mymaster', "$name: \$TEST_REDIS_MASTER_NAME");
    my ($old, $replica) = ($sentinel->master, $sentinel->replica);
    is($sentinel->master_addr($_), '127.0.0.1:' . $old->port,
       "$name: sentinel $_ names the master") for 0 .. 2;
    $old->cmd('SET', 'k', 'v');
    ok(wait_until(3, sub { ($replica->cmd('GET', 'k') // '') eq 'v' }),
       "$name: the replica replicates");
    my $t0 = time;
    $sentinel->failover;
    note(sprintf "$name: failover took %.1f s", time - $t0);
    is($sentinel->master->port, $replica->port, "$name: the replica is the master");
    is($sentinel->master_addr($_), '127.0.0.1:' . $replica->port,
       "$name: sentinel $_ says so") for 0 .. 2;
    is($replica->cmd('ROLE')->[0], 'master', "$name: ROLE master");
    is($old->cmd('ROLE')->[0], 'slave', "$name: the old master follows it");
    is($replica->cmd('GET', 'k'), 'v', "$name: with the data");
}



=== TEST 14: sentinel with passwords and TLS: SIGKILL of the master, the replica takes over
--- redis
sentinel tls: password=s3cret, sentinel_password=watch
--- requests
perl {
    my ($old, $replica) = ($sentinel->master, $sentinel->replica);
    my $s0 = $sentinel->{sentinel}[0];
    my ($rc, $out) = Processes::run_cmd([$RedisServer::CLI, '--tls', '--cacert',
        $sentinel->tls->{ca}, '-p', $s0->port, 'SENTINEL', 'MASTERS']);
    like($out, qr/NOAUTH/, "$name: the Sentinels want their password");
    ($rc, $out) = Processes::run_cmd([$RedisServer::CLI, '--tls', '--cacert',
        $sentinel->tls->{ca}, '-p', $old->port, 'GET', 'k']);
    like($out, qr/NOAUTH/, "$name: the master wants its password");
    $sentinel->kill_master;
    my $t0 = time;
    $sentinel->wait_for_new_master;
    my $took = time - $t0;
    cmp_ok($took, '<', 8, sprintf("$name: a new master in %.1f s", $took));
    is($sentinel->master->port, $replica->port, "$name: the replica");
    like($sentinel->master->cmd('ROLE'), qr/^master/, "$name: ROLE master");
    ok(!$sentinel->intact, "$name: not intact: not kept");
}
