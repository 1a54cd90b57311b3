# SPDX-License-Identifier: BSD-2-Clause
# throttle_metrics: the Redis backends' families (nginx_throttle_redis_*),
# against real redis-server processes and faults a real one produces: the
# scripts nginx sent are those Redis counted; the round trips are as many
# as the replies; errors by kind (a closed port, a silent server, a wrong
# password, TLS to a plain port, SCRIPT FLUSH, a Cluster's MOVED, ASK and
# CLUSTERDOWN, a Sentinel failover) as many as the servers gave; the
# connections open now as Redis lists them, over a killed worker and a
# reload; a reload keeps a kept backend's counters.

use strict;
use warnings;

use ThrottleTest;

use ClusterTraffic ();
use Processes ();

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

# nginx_throttle_redis_errors_total of backend $backend, kind $kind, in
# the text of /metrics.
sub ThrottleTest::Step::errors {
    my ($text, $backend, $kind) = @_;
    return ThrottleTest::Step::metric($text, 'nginx_throttle_redis_errors_total',
                                      backend => $backend, kind => $kind);
}

# The error replies of each kind of @kinds (MOVED, ASK, CLUSTERDOWN...)
# the live nodes of $cluster gave, summed over them (INFO errorstats):
# { kind => count }.
sub ThrottleTest::Step::error_replies {
    my ($cluster, @kinds) = @_;
    my %sum = map { $_ => 0 } @kinds;
    for my $node ($cluster->live_nodes) {
        my $info = $node->info('errorstats');
        for my $kind (@kinds) {
            my ($n) = ($info->{"errorstat_$kind"} // '') =~ /count=(\d+)/;
            $sum{$kind} += $n // 0;
        }
    }
    return \%sum;
}

# For each kind of @kinds (MOVED, ASK): one test that backend "c"'s
# kind=<kind> is the replies of that kind the nodes of $cluster gave.
# Returns those: { kind => count }.
sub ThrottleTest::Step::kinds_are_replies {
    my ($name, $cluster, @kinds) = @_;
    my $m = ThrottleTest::Step::metrics_text();
    my $replied = ThrottleTest::Step::error_replies($cluster, @kinds);
    for my $kind (@kinds) {
        Test::More::is(ThrottleTest::Step::errors($m, 'c', lc $kind),
                       $replied->{$kind},
                       "$name: kind=\L$kind\E = the nodes' $kind replies "
                       . "($replied->{$kind})");
    }
    return $replied;
}

# Whether every live node of $cluster says cluster_state:$state.
sub ThrottleTest::Step::cluster_state_is {
    my ($cluster, $state) = @_;
    return !grep { $_->cmd('CLUSTER', 'INFO') !~ /^cluster_state:$state\r?$/m }
                 $cluster->live_nodes;
}

# A request for each key of @keys; one test named $label: each got
# $throttle_status (X-Status) $want.
sub ThrottleTest::Step::statuses_are {
    my ($label, $want, @keys) = @_;
    my @got = map {
        ThrottleTest::Step::header(
            ThrottleTest::Step::request('GET /a.txt', 'X-Key' => $_), 'X-Status')
            // 'none'
    } @keys;
    Test::More::is("@got", join(' ', ($want) x @keys), $label);
}

# The pids of the block's nginx workers.
sub ThrottleTest::Step::workers {
    return Processes::children_of($ThrottleTest::Step::CURRENT->{master});
}

# Requests (a key each) until every worker running now has served $n of
# them (by their X-Pid), at most 100 x $n per worker: { pid => served }.
sub ThrottleTest::Step::serve_on_every_worker {
    my ($n) = @_;
    my %served = map { $_ => 0 } ThrottleTest::Step::workers();
    for my $i (1 .. 100 * $n * keys %served) {
        last unless grep { $_ < $n } values %served;
        my $res = ThrottleTest::Step::request('GET /a.txt', 'X-Key' => "k$i");
        $served{ ThrottleTest::Step::header($res, 'X-Pid') // 'none' }++;
    }
    return \%served;
}

# The clients $redis lists (CLIENT LIST) but the test's own connection,
# counted by the nginx worker whose socket each is (by its port), "other"
# for the rest: { pid => count }.
sub ThrottleTest::Step::redis_clients_by_worker {
    my ($redis) = @_;
    my %worker_of;
    for my $pid (ThrottleTest::Step::workers()) {
        $worker_of{$_} = $pid for Processes::local_ports_of($pid);
    }
    my $me = $redis->cmd('CLIENT', 'ID');
    my %by;
    for my $line (split /\n/, $redis->cmd('CLIENT', 'LIST')) {
        my ($id, $port) = $line =~ /\bid=(\d+) addr=[^ ]*:(\d+) / or next;
        $by{ $worker_of{$port} // 'other' }++ unless $id == $me;
    }
    return \%by;
}

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): the server{} of a block with none of its own:
zone s on every location, and the metrics at /metrics.

--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }


=== TEST 1: scripts sent, round trips and connections as Redis saw them
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT keepalive=2;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=4 redis=main;
--- requests
GET /a.txt x5 => 200
  > X-Key: alice
GET /a.txt => 429
  > X-Key: alice
GET /a.txt x3 => 200
  > X-Key: bob
perl {
    my $m = metrics_text();
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
    my $m = metrics_text();
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
--- requests
GET /a.txt x3 => 200
  > X-Key: alice
perl {
    my $before = metric(metrics_text(), 'nginx_throttle_redis_commands_total',
                        backend => 'main');
    ok($before >= 3, "$name: $before scripts before the reload");
    ok(reload(), "$name: reloaded");
    is(request('GET /a.txt', 'X-Key' => 'bob')->{status}, 200,
       "$name: a request after the reload");
    my $sent = $redis->calls('evalsha') + $redis->calls('eval');
    is(metric(metrics_text(), 'nginx_throttle_redis_commands_total',
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
--- requests
perl {
    for my $i (1 .. 12) {
        is(request('GET /a.txt', 'X-Key' => "key$i")->{status}, 200,
           "$name: key$i");
    }
    my $m = metrics_text();
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
    kinds_are_replies($name, $cluster, qw(MOVED ASK));
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
--- requests
GET /a.txt => 200
  > X-Key: before
perl {
    is(metric(metrics_text(), 'nginx_throttle_redis_errors_total', backend => 's',
              kind => 'failover'), 0, "$name: no failover yet");
    $sentinel->failover;
    my $seen = wait_until(10, sub {
        request('GET /a.txt', 'X-Key' => 'after');
        metric(metrics_text(), 'nginx_throttle_redis_errors_total', backend => 's',
               kind => 'failover') >= 1;
    });
    ok($seen, "$name: the master's change is counted as a failover");
    my $m = metrics_text();
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
--- requests
GET /a.txt => 200
  > X-Key: a
perl {
    my $m = metrics_text();
    ok(metric($m, 'nginx_throttle_redis_errors_total', backend => 's',
              kind => 'sentinel') >= 1, "$name: counted as kind=sentinel")
        or diag($m);
    is(metric($m, 'nginx_throttle_redis_commands_total', backend => 's'), 0,
       "$name: no script sent without a master");
}
--- error_log
sentinels do not know master "nosuch"



=== TEST 7: a Cluster that goes down: kind=clusterdown = the nodes' CLUSTERDOWN replies
--- redis
cluster: cluster-require-full-coverage yes; cluster-replica-no-failover yes
--- http_config
throttle_redis c cluster=$TEST_REDIS_CLUSTER;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=100 redis=c;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; add_header X-Status $throttle_status always; }
--- requests
perl {
    # a master killed, no replica may take over (cluster-replica-no-failover)
    # and every slot must be served (cluster-require-full-coverage): once
    # the others see it fail, every node answers CLUSTERDOWN to every
    # script. A cluster of the block's own: the shared one would be damaged.
    my @keys = map { ClusterTraffic::keys_on_master($cluster, $_, 2, "m$_-") }
               0 .. 2;
    statuses_are("$name: decided while up", 'PASSED', @keys);
    is(error_replies($cluster, 'CLUSTERDOWN')->{CLUSTERDOWN}, 0,
       "$name: no CLUSTERDOWN while up");
    $cluster->kill_master(0);
    ok(wait_until($cluster->node_timeout / 1000 + $Processes::TIMEOUT,
                  sub { cluster_state_is($cluster, 'fail') }),
       "$name: every live node says cluster_state:fail");
    statuses_are("$name: while down, throttle_on_error decides",
                 'ERROR_ALLOWED', (@keys) x 3);
    # Redis counts each CLUSTERDOWN it writes; nginx each one a script
    # gets (with TRYAGAIN, which one-key scripts never get): every reply
    # was read, the requests having been answered
    my $replied = error_replies($cluster, qw(CLUSTERDOWN TRYAGAIN));
    cmp_ok($replied->{CLUSTERDOWN}, '>', 0,
           "$name: the nodes answered CLUSTERDOWN ($replied->{CLUSTERDOWN})");
    is(errors(metrics_text(), 'c', 'clusterdown'),
       $replied->{CLUSTERDOWN} + $replied->{TRYAGAIN},
       "$name: kind=clusterdown = the nodes' CLUSTERDOWN and TRYAGAIN replies");
}



=== TEST 8: a slot half-way to another master: kind=ask, then kind=moved = the nodes' ASK and MOVED replies
--- redis
cluster
--- http_config
throttle_redis c cluster=$TEST_REDIS_CLUSTER cluster_refresh=1h;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=100 redis=c;
--- config
location = /metrics { throttle_metrics; }
location / { throttle zone=s; add_header X-Status $throttle_status always; }
--- requests
perl {
    # as t/redis_cluster.t: the slot of a key of master 0, MIGRATING to
    # master 1 (IMPORTING there); master 0 has no key of it (a block's
    # cluster starts empty), so it answers ASK to each script for it
    my ($source, $target) = ($cluster->masters)[0, 1];
    my ($key) = ClusterTraffic::keys_on_master($cluster, 0, 1, 'ask-');
    my $stored = "throttle:s:{$key}";
    my $slot = $cluster->slot_of($stored);
    is($source->cmd('CLUSTER', 'COUNTKEYSINSLOT', $slot), 0,
       "$name: no key of slot $slot on master 0");
    my ($source_id, $target_id) = map { $_->cmd('CLUSTER', 'MYID') } $source, $target;
    $target->cmd('CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $source_id);
    $source->cmd('CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $target_id);
    my $sent = 6;
    statuses_are("$name: decided after ASK", 'PASSED', ($key) x $sent);
    is(join(',', $target->keys_matching($stored)), $stored,
       "$name: the key is on master 1");
    my $replied = kinds_are_replies($name, $cluster, qw(ASK MOVED));
    is($replied->{ASK}, $sent, "$name: one ASK per script for the slot");

    # the move finished: master 1 owns the slot; the workers' slot maps
    # (read again in an hour) still say master 0, which answers MOVED
    $_->cmd('CLUSTER', 'SETSLOT', $slot, 'NODE', $target_id) for $target, $source;
    ok($cluster->wait_stable, "$name: the cluster agrees on the slot's new owner");
    statuses_are("$name: decided after the move", 'PASSED', ($key) x $sent);
    $replied = kinds_are_replies("$name, after the move", $cluster, qw(ASK MOVED));
    cmp_ok($replied->{MOVED}, '>', 0, "$name: the old owner answered MOVED");
}



=== TEST 9: connections, 2 workers: keepalive x workers as Redis lists them, over a killed worker and a reload
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT keepalive=3;
throttle_zone $http_x_key zone=s:1m rate=10r/m burst=100 redis=main;
--- config
add_header X-Pid $pid always;
location = /metrics { throttle_metrics; }
location / { throttle zone=s; }
--- requests
GET /a.txt x20 => 200
  > X-Key: first
perl {
    # a worker opens its connections as it needs them, one more for each
    # of its first scripts (round robin), and keeps them: once each has
    # sent 3 scripts, both hold keepalive=3 and the gauge is 2 x 3
    my $open = sub {
        metric(metrics_text(), 'nginx_throttle_redis_connections', backend => 'main')
    };
    my $all_open = sub {
        my ($what) = @_;
        my $served = serve_on_every_worker(3);
        ok(!grep({ $_ < 3 } values %$served),
           "$name: $what: each worker served 3 requests or more")
            or diag(explain $served);
        my $clients = redis_clients_by_worker($redis);
        is_deeply($clients, { map { $_ => 3 } keys %$served },
                  "$name: $what: Redis lists 3 connections of each worker");
        is($open->(), 6, "$name: $what: the gauge says as many, 6");
    };
    # what Redis lists once it has seen the connections of dead workers
    # go, and the gauge then
    my $settled = sub {
        my ($what, $want) = @_;
        my $clients;
        ok(wait_until($Processes::TIMEOUT, sub {
            $clients = redis_clients_by_worker($redis);
            !$clients->{other};
        }), "$name: $what: Redis lists only live workers' connections")
            or diag(explain $clients);
        my $listed = 0;
        $listed += $_ for values %$clients;
        is($listed, $want, "$name: $what: Redis lists $want");
        wait_until($Processes::TIMEOUT, sub { $open->() == $listed });
        is($open->(), $listed, "$name: $what: the gauge says as many");
    };
    $all_open->('at first');

    my ($dead, $new) = kill_worker();
    $settled->("worker $dead killed, $new in its place", 3);
    $all_open->('then');

    ok(reload(), "$name: reloaded");
    $settled->('after a reload', 0);
    $all_open->('then');
}
--- distinct
X-Pid >= 2
