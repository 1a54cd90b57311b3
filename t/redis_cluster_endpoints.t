# SPDX-License-Identifier: BSD-2-Clause
# cluster= backends against real Redis Clusters whose nodes announce no IP
# address (3 masters on loopback, t/lib/RedisCluster.pm), each shared by
# two nginx (2 workers each); docs/redis.md, "Cluster", says what each
# cluster-preferred-endpoint-type does:
#
# - unknown-endpoint: the slot map gives every master's host as nil, and
#   MOVED none (":<port>"): the node that answered, at that port;
# - hostname, every node with a cluster-announce-hostname of its own: the
#   slot map is read at the "ip" beside each name, and MOVED names a node
#   by its host name, which the module knows from the map.
#
# For each: keys on every master admit exactly their limit of a burst sent
# to both nginx at once, the rest get 429, none ERROR_*, and each master
# holds its keys; then a slot moves to another master (redis-cli --cluster
# reshard) unknown to the workers' maps (cluster_refresh=1h): its keys'
# first scripts go to the old master, whose MOVED is followed, and the
# limits stay exact. No crash, and no Redis error, in the error logs.
#
# Windows are hours (r/h), guarded against the turn of the hour.

use strict;
use warnings;

use Test::More;

use RedisCluster;
use ThrottleTest;
use Clock qw(hour_guard);
use ClusterTraffic qw(keys_on_master no_crash part burst_is_exact);

require_redis_module();

my $LIMIT = 5;              # rate=1r/h burst=4
my $SENT = 2 * $LIMIT + 2;  # requests per key in a burst, over both nodes

my %ENDPOINTS = (
    'unknown-endpoint' => {
        conf => ['cluster-preferred-endpoint-type unknown-endpoint'],
    },
    hostname => {
        conf      => ['cluster-preferred-endpoint-type hostname'],
        node_conf => sub { "cluster-announce-hostname node$_[0].example" },
    },
);

my $SERVER = <<'SERVER';
add_header X-Status $throttle_status always;
location = /gcra { throttle zone=gcra; empty_gif; }
SERVER

for my $type (sort keys %ENDPOINTS) {
    part($type, sub {
        my $cluster = RedisCluster->start(replicas => 0, %{ $ENDPOINTS{$type} });
        # maps are read at the start, then only when a MOVED or a failure
        # asks
        my $http = 'throttle_redis main cluster=' . $cluster->seeds
                 . " cluster_refresh=1h;\n"
                 . 'throttle_zone $http_x_key zone=gcra:1m rate=1r/h burst=4 redis=main;';
        my @nodes = map { start_instance(http_config => $http, config => $SERVER) } 1 .. 2;
        my @masters = $cluster->masters;
        my @keys = map { [keys_on_master($cluster, $_, 2, "e$_-")] } 0 .. 2;
        hour_guard(20);

        my $t = burst_is_exact($type, \@nodes, '/gcra', $SENT, $LIMIT, map { @$_ } @keys);
        is_deeply($t->{status}, { 200 => 6 * $LIMIT, 429 => 6 * ($SENT - $LIMIT) },
                  "$type: the others get 429");
        for my $i (0 .. 2) {
            is(join(',', sort $masters[$i]->keys_matching('throttle:gcra:{e*')),
               join(',', map { "throttle:gcra:{$_}" } sort @{ $keys[$i] }),
               "$type: master $i holds its keys");
        }

        # the lowest slot of master 0, moved to master 1
        my $slot = $cluster->slots_of($masters[0])->[0][0];
        my @moved = keys_on_master($cluster, 0, 2, 'm', $slot + 1);
        $cluster->reshard(from => 0, to => 1, slots => 1);
        $cluster->reset;
        burst_is_exact("$type, MOVED", \@nodes, '/gcra', $SENT, $LIMIT, @moved);
        # (Redis counts a script it redirects as a rejected call)
        my $stats = $masters[0]->commandstats;
        cmp_ok(($stats->{evalsha}{rejected_calls} // 0)
               + ($stats->{eval}{rejected_calls} // 0), '>', 0,
               "$type, MOVED: master 0 was asked first");
        is(join(',', sort $masters[1]->keys_matching('throttle:gcra:{m*')),
           join(',', map { "throttle:gcra:{$_}" } sort @moved),
           "$type, MOVED: master 1 holds the keys");

        for my $i (0, 1) {
            my $log = no_crash($nodes[$i], "$type, node " . ($i + 1));
            unlike($log, qr/\[error\].*throttle redis/,
                   "$type, node " . ($i + 1) . ': no Redis error in error.log');
        }
        $cluster->stop;
    });
}

done_testing();
