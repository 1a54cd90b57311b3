# SPDX-License-Identifier: BSD-2-Clause
# cluster= backends against a real Redis Cluster (3 masters + 3 replicas on
# loopback, t/lib/RedisCluster.pm), shared by two nginx (2 workers each):
#
# - strict zones of every algorithm, keys on all three masters: each key
#   admits exactly its limit of a burst sent to both nginx at once, and
#   no request gets ERROR_*;
# - async zones: a zone's keys are spread over more than one master
#   (<prefix>{<zone>:<n>}:<key>), and two nodes hold the limit as closely
#   as with one Redis (t/redis_async.t's two-node bounds);
# - resharding under traffic (redis-cli --cluster reshard moving the slots
#   of the keys in use): no ERROR_*, limits still exact;
# - failover: SIGKILL of a master under traffic: its keys get
#   throttle_on_error within timeout, then decisions again within 250 ms
#   of its replica's promotion, no reload, no worker crash; the other
#   masters' keys never get ERROR_*;
# - failover timing, with Redis's default cluster-require-full-coverage
#   (every node answers CLUSTERDOWN until the replica takes over): five
#   kills, each time every key decided again within 250 ms of the replica
#   saying role:master;
# - password= and tls (a cluster of its own each).
#
# Plain Test::More: one cluster serves every part but the last two, which
# need clusters configured otherwise (a cluster takes 2-3 s to start).
# Windows are hours (r/h), guarded against the turn of the hour.

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);

use Processes qw(children_of);
use RedisCluster;
use ThrottleTest;
use Clock qw(hour_guard);
use ClusterTraffic qw(keys_on_master at_once tally no_crash
                      traffic_around show part burst_is_exact);
use Failover qw(when_true steady_rounds back_after median worst);

require_redis_module();

my $LIMIT = 5;          # rate=1r/h burst=4: 5 per key for every algorithm
my $SENT = 2 * $LIMIT + 2;  # requests per key in a burst, over both nodes
my $SHARDS = 16;        # async zones: {<zone>:<n>}, n = CRC16(key) mod 16
my $TIMEOUT_MS = 500;   # the backend's timeout=

sub http_config {
    my ($backend) = @_;
    return <<"HTTP";
throttle_redis main $backend timeout=${TIMEOUT_MS}ms connect_timeout=${TIMEOUT_MS}ms;
throttle_zone \$http_x_key zone=gcra:1m rate=1r/h burst=4 redis=main;
throttle_zone \$http_x_key zone=fw:1m rate=1r/h burst=4 algorithm=fixed_window redis=main;
throttle_zone \$http_x_key zone=sw:1m rate=1r/h burst=4 algorithm=sliding_window redis=main;
throttle_zone \$http_x_key zone=sl:1m rate=1r/h burst=4 algorithm=sliding_log redis=main;
throttle_zone \$http_x_key zone=big:1m rate=1r/h burst=19 redis=main;
throttle_zone \$http_x_key zone=many:1m rate=1r/h burst=99999 redis=main;
throttle_zone \$http_x_key zone=async:1m rate=1r/m burst=9 redis=main sync=async;
HTTP
}

my $SERVER = <<'SERVER';
add_header X-Status $throttle_status always;
add_header X-Pid $pid always;
location = /gcra  { throttle zone=gcra;  empty_gif; }
location = /fw    { throttle zone=fw;    empty_gif; }
location = /sw    { throttle zone=sw;    empty_gif; }
location = /sl    { throttle zone=sl;    empty_gif; }
location = /big   { throttle zone=big;   empty_gif; }
location = /many  { throttle zone=many;  empty_gif; }
location = /async { throttle zone=async; empty_gif; }
SERVER

sub start_nodes {
    my ($backend) = @_;
    return map { start_instance(http_config => http_config($backend),
                                config => $SERVER) } 1 .. 2;
}

# Which masters hold keys matching $pattern: { master index => [keys] }.
sub keys_by_master {
    my ($cluster, $pattern) = @_;
    my @masters = $cluster->masters;
    return { map { my @k = $masters[$_]->keys_matching($pattern);
                   @k ? ($_ => \@k) : () } 0 .. $#masters };
}

# ---------------------------------------------------------------------------

sub strict_zones {
    my ($cluster, $nodes) = @_;
    my @keys = map { keys_on_master($cluster, $_, 2, "s$_-") } 0 .. 2;
    hour_guard(30);
    for my $zone (qw(gcra fw sw sl)) {
        burst_is_exact("strict $zone", $nodes, "/$zone", $SENT, $LIMIT, @keys);
    }
    my $where = keys_by_master($cluster, 'throttle:gcra:{*}');
    is(join(',', sort keys %$where), '0,1,2',
       'strict: the keys are on all three masters');
    for my $i (0 .. 2) {
        is(join(',', @{ $where->{$i} || [] }),
           join(',', map { "throttle:gcra:{$_}" } keys_on_master($cluster, $i, 2, "s$i-")),
           "strict: master $i holds its keys, named <prefix><zone>:{<key>}");
    }
    my $counts = $cluster->command_counts;
    for my $i (0 .. 2) {
        cmp_ok($counts->[$i]{evalsha} + $counts->[$i]{eval}, '>', 0,
               "strict: master $i ran scripts");
    }
}

# ASK: a slot of master 0 half-way to master 1 (MIGRATING there, IMPORTING
# here, with no key of it on master 0 yet): a new key's script is answered
# ASK, and the module sends ASKING and the script to master 1, where the
# key then is; the slot map stays as it was. The slot is then given to
# master 1, as a finished move would.
sub ask_followed {
    my ($cluster, $nodes) = @_;
    my ($source, $target) = ($cluster->masters)[0, 1];
    my ($key) = grep {
        !$source->cmd('CLUSTER', 'COUNTKEYSINSLOT',
                      $cluster->slot_of("throttle:gcra:{$_}"))
    } keys_on_master($cluster, 0, 20, 'ask-');
    my $slot = $cluster->slot_of("throttle:gcra:{$key}");
    my ($source_id, $target_id) = map { $_->cmd('CLUSTER', 'MYID') } $source, $target;
    my $asking = $cluster->command_counts->[1]{asking};
    $target->cmd('CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $source_id);
    $source->cmd('CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $target_id);
    my $t = tally(at_once(map { [$nodes->[$_ % 2], '/gcra', $key] } 1 .. 2));
    is_deeply($t->{x_status}, { PASSED => 2 }, 'ASK: both requests decided');
    cmp_ok($cluster->command_counts->[1]{asking} - $asking, '>=', 2,
           'ASK: master 1 got ASKING before each script');
    $_->cmd('CLUSTER', 'SETSLOT', $slot, 'NODE', $target_id) for $target, $source;
    is(join(',', $target->keys_matching("throttle:gcra:{$key}")),
       "throttle:gcra:{$key}", 'ASK: the key is on master 1');
    is(join(',', $source->keys_matching("throttle:gcra:{$key}")), '',
       'ASK: ... and not on master 0');
    ok($cluster->wait_stable, 'ASK: the cluster agrees on the slot\'s new owner');
}

# Async: 48 keys on node A spread a zone over more than one master; two
# nodes at once on one key stay within t/redis_async.t's bounds, and
# Redis gets exactly what they admitted.
sub async_zone {
    my ($cluster, $nodes) = @_;
    my @spread = map { "a$_" } 0 .. 47;
    my $t = tally(at_once(map { [$nodes->[0], '/async', $_] } @spread));
    is_deeply($t->{x_status}, { PASSED => 48 }, 'async: 48 keys decided at once');
    my $where;
    ok(ThrottleTest::Step::wait_until(3, sub {
        $where = keys_by_master($cluster, 'throttle:{async:*');
        my $n = 0;
        $n += @$_ for values %$where;
        return $n == 48;
    }), 'async: every key reaches the cluster') or diag(explain $where);
    cmp_ok(scalar(keys %$where), '>', 1,
           'async: the zone\'s keys are on more than one master');
    my @names = map { @$_ } values %$where;
    my @bad = grep {
        my ($n, $key) = /^throttle:\{async:(\d+)\}:(.+)$/;
        !defined $key || $n != $cluster->slot_of($key) % $SHARDS;
    } @names;
    is("@bad", '', "async: keys named <prefix>{<zone>:<n>}:<key>, n = CRC16(key) mod $SHARDS");

    my @both = at_once(map { [$nodes->[$_ % 2], '/async', 'both'] } 0 .. 39);
    my %by_node;
    $by_node{ $_->{node}{port} } += $_->{status} eq '200' for @both;
    my ($n1, $n2) = map { $by_node{ $_->{port} } // 0 } @$nodes;
    my $tb = tally(@both);
    is(show(@{ $tb->{errors} }), '', 'async, at once: no ERROR_*');
    ok($n1 <= 10 && $n2 <= 10, "async, at once: neither node admits more than burst+1 ($n1, $n2)");
    cmp_ok($n1 + $n2, '>=', 10, 'async, at once: at least burst+1 in total');
    cmp_ok($n1 + $n2, '<=', 20, 'async, at once: at most nodes x (burst+1) in total');
    my $key = 'throttle:{async:' . ($cluster->slot_of('both') % $SHARDS) . '}:both';
    my $owner = $cluster->master_of_key("async:" . ($cluster->slot_of('both') % $SHARDS));
    my $units;
    ok(ThrottleTest::Step::wait_until(3, sub {
        my $tat = $owner->cmd('GET', $key) // return 0;
        $units = ($tat - $owner->time_us) / 60e6;
        return $units > $n1 + $n2 - 1 && $units <= $n1 + $n2;
    }), "async, at once: the owner of $key holds the " . ($n1 + $n2) . ' units admitted')
        or diag('units: ' . ($units // 'none'));
}

# Resharding under traffic: keys whose slots are the lowest of master 0
# (redis-cli moves those first, one key per MIGRATE here: slowly) get two
# requests each per round, to both nodes, while their slots move to
# master 1: one on a zone that never rejects (every request goes to
# Redis, none is decided by a cached denial), one on a zone of limit 20.
sub reshard_under_traffic {
    my ($cluster, $nodes) = @_;
    my $slots = 100;
    my $first = $cluster->slots_of(($cluster->masters)[0])->[0][0];
    my @keys = keys_on_master($cluster, 0, 8, 'r', $first + $slots);
    my (@res, $during);
    my $round = sub {
        push @res, at_once(map { ([$nodes->[$_ % 2], '/many', $keys[$_]],
                                  [$nodes->[($_ + 1) % 2], '/big', $keys[$_]]) } 0 .. $#keys);
    };
    $round->();
    my $job = $cluster->reshard(from => 0, to => 1, slots => $slots,
                                background => 1, pipeline => 1);
    my $rounds = 1;
    while ($cluster->busy($job) || $rounds < 25) {
        $round->();
        $rounds++;
        $during++ if $cluster->busy($job);
    }
    my ($rc, $out) = $cluster->finish($job);
    is($rc, 0, 'reshard: redis-cli --cluster reshard succeeded') or diag($out);
    cmp_ok($during // 0, '>=', 3, "reshard: requests flowed while slots moved ($rounds rounds, "
           . ($during // 0) . ' during the move)');
    is(join(',', map { $cluster->master_index_of_key($_) } @keys), join(',', (1) x @keys),
       'reshard: the keys\' slots are on master 1 now');
    my $t = tally(@res);
    is(show(@{ $t->{errors} }), '', 'reshard: no ERROR_*');
    is_deeply(tally(grep { $_->{uri} eq '/big' } @res)->{admitted}, { map { $_ => 20 } @keys },
              'reshard: each key admitted exactly its limit (20)');
    my $many = tally(grep { $_->{uri} eq '/many' } @res)->{admitted};
    my $owner = ($cluster->masters)[1];
    my %held = map {
        my $tat = $owner->cmd('GET', "throttle:many:{$_}");
        ($_ => defined $tat ? sprintf('%.0f', ($tat - $owner->time_us) / 3.6e9) : 'none')
    } @keys;
    is_deeply(\%held, $many, 'reshard: the new owner holds every unit admitted, '
              . 'once (never rejecting zone: units = requests)');
}

# The replica of master $i, and a sub that waits for the moment it says
# role:master (INFO replication, polled by a child of its own).
sub watch_promotion {
    my ($cluster, $i) = @_;
    my $port = ($cluster->masters)[$i]->port;
    my ($replica) = grep { my $r = $_->info('replication');
                           $r->{role} eq 'slave' && $r->{master_port} == $port }
                    $cluster->live_nodes;
    my $promoted = when_true(sub {
        delete $replica->{client};    # the parent's connection stays its own
        return (eval { $replica->info('replication')->{role} } // '') eq 'master';
    });
    return ($replica, $promoted);
}

# Failover: keys on master 2 and on the others, one request each per
# round to alternating nodes, before and after SIGKILL of master 2.
sub failover_under_traffic {
    my ($cluster, $nodes) = @_;
    my @victim = keys_on_master($cluster, 2, 4, 'f');
    my @other = map { keys_on_master($cluster, $_, 2, 'f') } 0, 1;
    my %is_victim = map { $_ => 1 } @victim;
    my @workers = map { [children_of($_->{master})] } @$nodes;
    my $window = $cluster->node_timeout / 1000 + 2;
    my (undef, $promoted) = watch_promotion($cluster, 2);
    my ($res, $killed) = traffic_around($nodes, '/many', [@victim, @other],
                                        1.5 + $window + 1.5, 1.5,
                                        sub { $cluster->kill_master(2) });
    my $promoted_at = $promoted->();
    my @res = @$res;
    my @other_res = grep { !$is_victim{ $_->{key} } } @res;
    is(show(grep { $_->{x_status} !~ /^(PASSED|REJECTED)$/ } @other_res), '',
       'failover: the other masters\' keys never get ERROR_*');
    my @vict = grep { $is_victim{ $_->{key} } } @res;
    is(show(grep { $_->{at} < $killed && $_->{x_status} ne 'PASSED' } @vict), '',
       'failover: master 2\'s keys decided before the kill');
    my @gap = grep { $_->{at} >= $killed && $_->{x_status} ne 'PASSED' } @vict;
    cmp_ok(scalar @gap, '>', 0, 'failover: master 2\'s keys had a gap');
    is(show(grep { $_->{x_status} ne 'ERROR_ALLOWED' || $_->{status} ne '200' } @gap), '',
       'failover: during the gap they get throttle_on_error (allow: ERROR_ALLOWED)');
    my ($slowest) = sort { $b <=> $a } map { $_->{elapsed} } @gap;
    cmp_ok($slowest // 0, '<', $TIMEOUT_MS / 1000 + 0.5,
           'failover: ... within timeout (the slowest of them, in s)');
    ok($promoted_at, 'failover: the replica was promoted (role:master)')
        and note(sprintf 'failover: promoted %.0f ms after the kill', ($promoted_at - $killed) * 1000);
    # the promotion's own time is Redis's (cluster-node-timeout and an
    # election): on a busy machine it may take most of the traffic's time
    my $late = ($promoted_at // $killed + $window) + 0.25;
    is(show(grep { $_->{at} >= $late && $_->{x_status} ne 'PASSED' } @vict), '',
       'failover: decided again within 250 ms of the promotion');
    cmp_ok(scalar(grep { $_->{at} >= $late } @vict), '>', 0,
           'failover: ... (requests were sent after that)');
    ok($cluster->wait_for_failover, 'failover: a replica took master 2\'s slots');
    is_deeply([map { [children_of($_->{master})] } @$nodes], \@workers,
              'failover: the same workers (no reload, no crash)');
}

# Kills of master 0 under steady traffic (30 keys, 10 on each master, a
# request each every 50 ms): each time, the seconds from the promotion of
# its replica to the first round after which no request fell to
# throttle_on_error; the killed master then comes back as a replica.
sub failover_timing {
    my ($cluster, $nodes, $kills) = @_;
    my @keys = map { keys_on_master($cluster, $_, 10, "ft$_-") } 0 .. 2;
    my @back;
    for my $kill (1 .. $kills) {
        my ($replica, $promoted) = watch_promotion($cluster, 0);
        my $dead;
        my ($rounds) = steady_rounds($nodes, '/many', \@keys, 5, 0.05, 1,
                                     sub { $dead = $cluster->kill_master(0) });
        my $at = $promoted->();
        ok($at, "failover timing, kill $kill: the replica was promoted") or next;
        my $back = back_after($rounds, $at);
        ok(defined $back, "failover timing, kill $kill: decisions came back") or next;
        cmp_ok($back, '<=', 0.25, "failover timing, kill $kill: every key decided again "
               . 'within 250 ms of the promotion (s)');
        push @back, $back;
        ok($cluster->revive($dead), "failover timing, kill $kill: the old master is a replica again");
    }
    note(sprintf 'failover timing: decisions back %s ms after the promotion; median %.0f, worst %.0f',
         join(' ', map { sprintf '%.0f', $_ * 1000 } @back), median(@back) * 1000, worst(@back) * 1000)
        if @back;
}

# ---------------------------------------------------------------------------

part('one cluster, two nginx', sub {
    my $cluster = RedisCluster->start;
    my @nodes = start_nodes('cluster=' . $cluster->seeds);
    for my $part (\&strict_zones, \&ask_followed, \&async_zone,
                  \&reshard_under_traffic,
                  \&failover_under_traffic) {
        part('a part', sub { $part->($cluster, \@nodes) });
    }
    no_crash($nodes[$_], 'node ' . ($_ + 1)) for 0, 1;
    $cluster->stop;
});

part('failover timing, full coverage', sub {
    my $cluster = RedisCluster->start(conf => ['cluster-require-full-coverage yes']);
    my @nodes = start_nodes('cluster=' . $cluster->seeds);
    failover_timing($cluster, \@nodes, 5);
    no_crash($nodes[$_], 'failover timing, node ' . ($_ + 1)) for 0, 1;
    $cluster->stop;
});

# password=: every node requires it (the default user), AUTH on each
# connection to every node
part('password=', sub {
    my $cluster = RedisCluster->start(conf => ['requirepass s3cret']);
    my @nodes = start_nodes('cluster=' . $cluster->seeds . ' password=s3cret');
    my @keys = map { keys_on_master($cluster, $_, 1, "p$_-") } 0 .. 2;
    burst_is_exact('password=', \@nodes, '/gcra', $SENT, $LIMIT, @keys);
    no_crash($nodes[$_], 'password=, node ' . ($_ + 1)) for 0, 1;
    $cluster->stop;
});

# tls: TLS and AUTH to every node (certificates made at test time)
part('tls', sub {
    my $cluster = RedisCluster->start(tls => 1, conf => ['requirepass s3cret']);
    my $ca = $cluster->tls->{ca};
    my @nodes = start_nodes('cluster=' . $cluster->seeds
                            . " password=s3cret tls tls_trusted_certificate=$ca");
    my @keys = map { keys_on_master($cluster, $_, 1, "t$_-") } 0 .. 2;
    hour_guard(10);
    burst_is_exact('tls', \@nodes, '/gcra', $SENT, $LIMIT, @keys);
    burst_is_exact('tls', \@nodes, '/sl', $SENT, $LIMIT, @keys);
    my $t = tally(at_once(map { [$nodes[0], '/async', "ta$_"] } 0 .. 19));
    is_deeply($t->{x_status}, { PASSED => 20 }, 'tls: async zone decides');
    ok(ThrottleTest::Step::wait_until(3, sub {
        my $where = keys_by_master($cluster, 'throttle:{async:*');
        return scalar(keys %$where) > 1;
    }), 'tls: async keys reach more than one master');
    no_crash($nodes[$_], 'tls, node ' . ($_ + 1)) for 0, 1;
    $cluster->stop;
});

done_testing();
