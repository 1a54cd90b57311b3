# throttle_metrics: the Redis backends' families (nginx_throttle_redis_*),
# against real redis-server processes and faults a real one produces: the
# scripts nginx sent are those Redis counted; the round trips are as many
# as the replies; errors by kind (a closed port, a silent server, a wrong
# password, TLS to a plain port, SCRIPT FLUSH); connections open now; the
# text passes promtool; a reload keeps a kept backend's counters.

use strict;
use warnings;

use ThrottleTest;

require_redis_module();
run_blocks();

# The sample of family $name with labels %want in the text of /metrics;
# undef if absent.
sub ThrottleTest::Step::metric {
    my ($text, $name, %want) = @_;
    for my $line (split /\n/, $text) {
        next if $line =~ /^#/;
        my ($n, $labels, $value) = $line =~ /^(\w+)(?:\{(.*)\})? (\S+)$/
            or next;
        next unless $n eq $name;
        my %got = ($labels // '') =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
        next if grep { ($got{$_} // "\0") ne $want{$_} } keys %want;
        next if keys %got != keys %want;
        return $value;
    }
    return undef;
}

# /metrics as text
sub ThrottleTest::Step::scrape {
    my $res = ThrottleTest::Step::request('GET /metrics');
    die "GET /metrics: $res->{status}" unless $res->{status} == 200;
    return $res->{body};
}

__DATA__

=== TEST 1: scripts sent, round trips and connections as Redis saw them
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT keepalive=2;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=4 redis=main;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
GET /a.txt x5 => 200
  > X-Key: alice
GET /a.txt => 429
  > X-Key: alice
GET /a.txt x3 => 200
  > X-Key: bob
perl {
    my $m = scrape();
    my $sent = $redis->calls('evalsha') + $redis->calls('eval');
    is(metric($m, 'nginx_throttle_redis_commands_total', backend => 'main'),
       $sent, "$name: commands_total = the EVALSHA/EVAL Redis counted ($sent)");
    is(metric($m, 'nginx_throttle_redis_latency_seconds_count',
              backend => 'main'),
       $sent, "$name: a round trip per script");
    is(metric($m, 'nginx_throttle_redis_latency_seconds_bucket',
              backend => 'main', le => '+Inf'),
       $sent, "$name: +Inf bucket = count");
    my $last = 0;
    my @le = qw(0.000100 0.000250 0.000500 0.001000 0.002500 0.005000
                0.010000 0.025000 0.050000 0.100000 0.250000 0.500000
                1.000000);
    for my $le (@le) {
        my $v = metric($m, 'nginx_throttle_redis_latency_seconds_bucket',
                       backend => 'main', le => $le);
        ok(defined $v && $v >= $last, "$name: bucket le=$le cumulative")
            or diag($m);
        $last = $v // 0;
    }
    my $sum = metric($m, 'nginx_throttle_redis_latency_seconds_sum',
                     backend => 'main');
    ok($sum > 0 && $sum < $sent * 1.0, "$name: latency sum $sum s");
    my $open = metric($m, 'nginx_throttle_redis_connections',
                      backend => 'main');
    ok($open >= 1 && $open <= 4,
       "$name: connections open now: $open (1 to keepalive x workers)");
    # a fresh Redis lacks the script: each worker's first EVALSHA may meet
    # NOSCRIPT, which Redis counts as a failed call
    is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'main',
              kind => 'noscript'),
       $redis->commandstats->{evalsha}{failed_calls} // 0,
       "$name: noscript = the EVALSHA calls Redis failed");
    for my $kind (qw(timeout connect tls auth reply)) {
        is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'main',
                  kind => $kind), 0, "$name: no $kind error");
    }
    is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'main',
              kind => 'moved'), undef,
       "$name: a single server lists no Cluster kinds");
    unlike($m, qr/slot_map_refreshes/, "$name: no slot map without a Cluster");
}



=== TEST 2: errors by kind: a closed port, a silent server, a wrong password, TLS to a plain port, SCRIPT FLUSH
--- redis
closed
fake silent
redis: requirepass right
redis
--- http_config
throttle_redis closed server=127.0.0.1:$TEST_REDIS_PORT;
throttle_redis silent server=127.0.0.1:$TEST_REDIS_PORT_2 timeout=200ms;
throttle_redis wrongpw server=127.0.0.1:$TEST_REDIS_PORT_3 password=wrong;
throttle_redis plain server=127.0.0.1:$TEST_REDIS_PORT_4 tls tls_verify=off;
throttle_redis flushed server=127.0.0.1:$TEST_REDIS_PORT_4;
throttle_zone $http_x_key zone=c:1m rate=10r/m redis=closed;
throttle_zone $http_x_key zone=s:1m rate=10r/m redis=silent;
throttle_zone $http_x_key zone=w:1m rate=10r/m redis=wrongpw;
throttle_zone $http_x_key zone=t:1m rate=10r/m redis=plain;
throttle_zone $http_x_key zone=f:1m rate=10r/m redis=flushed;
--- config
location = /metrics { throttle_metrics; }
location /c { throttle zone=c; alias $TEST_NGINX_HTML_DIR/a.txt; }
location /s { throttle zone=s; alias $TEST_NGINX_HTML_DIR/a.txt; }
location /w { throttle zone=w; alias $TEST_NGINX_HTML_DIR/a.txt; }
location /t { throttle zone=t; alias $TEST_NGINX_HTML_DIR/a.txt; }
location /f { throttle zone=f; alias $TEST_NGINX_HTML_DIR/a.txt; }
--- requests
GET /c => 200
  > X-Key: a
GET /s => 200
  > X-Key: a
GET /w => 200
  > X-Key: a
GET /t => 200
  > X-Key: a
GET /f => 200
  > X-Key: a
perl: $redis[3]->cmd('SCRIPT', 'FLUSH');
GET /f => 200
  > X-Key: b
perl {
    my $m = scrape();
    my %kind = (closed => 'connect', silent => 'timeout', wrongpw => 'auth',
                plain => 'tls', flushed => 'noscript');
    for my $b (sort keys %kind) {
        my $n = metric($m, 'nginx_throttle_redis_errors_total',
                       backend => $b, kind => $kind{$b});
        ok($n && $n >= 1, "$name: $b: kind=$kind{$b} counted ($n)")
            or diag($m);
    }
    is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'flushed',
              kind => 'noscript'), 2,
       "$name: two NOSCRIPT, recovered: a fresh Redis's, and after the flush");
    is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'flushed',
              kind => 'connect'), 0, "$name: flushed: no other error");
}
--- error_log
throttle redis "closed"



=== TEST 3: a reload keeps a kept backend's figures
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=4 redis=main;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
GET /a.txt x3 => 200
  > X-Key: alice
perl {
    my $before = metric(scrape(), 'nginx_throttle_redis_commands_total',
                        backend => 'main');
    ok($before >= 3, "$name: $before scripts before the reload");
    ok(reload(), "$name: reloaded");
    is(request('GET /a.txt', 'X-Key' => 'bob')->{status}, 200,
       "$name: a request after the reload");
    my $sent = $redis->calls('evalsha') + $redis->calls('eval');
    is(metric(scrape(), 'nginx_throttle_redis_commands_total',
              backend => 'main'),
       $sent, "$name: every script since the start, over the reload ($sent)");
    ok($sent > $before, "$name: and the new one");
}



=== TEST 4: a Cluster backend: its kinds, the slot map reads, a script per request
--- redis
cluster
--- http_config
throttle_redis c cluster=$TEST_REDIS_CLUSTER;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=4 redis=c;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
perl {
    for my $i (1 .. 12) {
        is(request('GET /a.txt', 'X-Key' => "key$i")->{status}, 200,
           "$name: key$i");
    }
    my $m = scrape();
    # Redis 7 counts a script it answered MOVED among rejected calls
    my $sent = 0;
    for my $node ($cluster->nodes) {
        my $st = $node->commandstats;
        for my $c (qw(evalsha eval)) {
            $sent += ($st->{$c}{calls} // 0) + ($st->{$c}{rejected_calls} // 0);
        }
    }
    is(metric($m, 'nginx_throttle_redis_commands_total', backend => 'c'),
       $sent, "$name: commands_total = the scripts the nodes counted");
    # every MOVED and ASK reply a node gave (INFO errorstats)
    my %replied;
    for my $node ($cluster->nodes) {
        my $info = $node->info('errorstats');
        for my $kind (qw(MOVED ASK)) {
            my ($n) = ($info->{"errorstat_$kind"} // '') =~ /count=(\d+)/;
            $replied{lc $kind} += $n // 0;
        }
    }
    for my $kind (qw(moved ask)) {
        is(metric($m, 'nginx_throttle_redis_errors_total', backend => 'c',
                  kind => $kind),
           $replied{$kind}, "$name: kind=$kind = the nodes' $kind replies");
    }
    ok(metric($m, 'nginx_throttle_redis_slot_map_refreshes_total',
              backend => 'c') >= 1, "$name: the slot map was read");
    for my $kind (qw(timeout connect tls auth reply noscript moved ask
                     clusterdown sentinel failover)) {
        ok(defined metric($m, 'nginx_throttle_redis_errors_total',
                          backend => 'c', kind => $kind),
           "$name: kind=$kind listed");
    }
}



=== TEST 5: a Sentinel backend: a failover is counted, and its kinds listed
--- redis
sentinel
--- http_config
throttle_redis s sentinel=$TEST_REDIS_SENTINELS master=$TEST_REDIS_MASTER_NAME;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=100 redis=s;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
GET /a.txt => 200
  > X-Key: before
perl {
    is(metric(scrape(), 'nginx_throttle_redis_errors_total', backend => 's',
              kind => 'failover'), 0, "$name: no failover yet");
    $sentinel->failover;
    my $seen = wait_until(10, sub {
        request('GET /a.txt', 'X-Key' => 'after');
        metric(scrape(), 'nginx_throttle_redis_errors_total', backend => 's',
               kind => 'failover') >= 1;
    });
    ok($seen, "$name: the master's change is counted as a failover");
    my $m = scrape();
    for my $kind (qw(moved ask clusterdown sentinel failover)) {
        ok(defined metric($m, 'nginx_throttle_redis_errors_total',
                          backend => 's', kind => $kind),
           "$name: kind=$kind listed");
    }
    is(metric($m, 'nginx_throttle_redis_slot_map_refreshes_total',
              backend => 's'), undef, "$name: no slot map without a Cluster");
}



=== TEST 6: sentinels that do not know the master: kind=sentinel
--- redis
sentinel
--- http_config
throttle_redis s sentinel=$TEST_REDIS_SENTINELS master=nosuch;
throttle_zone $http_x_key zone=s:1m rate=10r/m redis=s;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
GET /a.txt => 200
  > X-Key: a
perl {
    my $m = scrape();
    ok(metric($m, 'nginx_throttle_redis_errors_total', backend => 's',
              kind => 'sentinel') >= 1, "$name: counted as kind=sentinel")
        or diag($m);
    is(metric($m, 'nginx_throttle_redis_commands_total', backend => 's'), 0,
       "$name: no script sent without a master");
}
--- error_log
sentinels do not know master "nosuch"
