#!/usr/bin/env perl
# SPDX-License-Identifier: BSD-2-Clause
# Writes the seed corpus of strict_reply, sync_reply and cluster_reply
# (scripts/fuzz/corpus/<target>/): what a real redis-server sends back, byte
# for byte, for the module's scripts (src/scripts/, each after the prelude,
# as cmake/embed_scripts.cmake joins them) called with ARGV as the zone of
# the seed's setup line would send it; and what a real cluster, sentinel and
# replica answer the transport. Run once, from the repository's root:
#
#     perl -I t/lib scripts/fuzz/capture_replies.pl
use strict;
use warnings;

use File::Path qw(make_path);
use IO::Select;
use Processes qw(wait_until free_port);
use RedisServer;

my $CORPUS = 'scripts/fuzz/corpus';

sub script {
    my ($name) = @_;
    local $/;
    my $source = '';
    for my $file ('src/scripts/lib/prelude.lua', "src/scripts/$name.lua") {
        open my $fh, '<', $file or die "$file: $!";
        $source .= <$fh> . ($file =~ /prelude/ ? "\n" : '');
    }
    return $source;
}

# The length of the first complete RESP reply in $buf, or undef.
sub reply_length {
    my ($buf, $at) = @_;
    $at //= 0;
    my $eol = index $buf, "\r\n", $at;
    return undef if $eol < 0;
    my ($type, $n) = (substr($buf, $at, 1), substr($buf, $at + 1, $eol - $at - 1));
    my $end = $eol + 2;
    if ($type eq '$') {
        return $n < 0 ? $end - $at
             : length($buf) >= $end + $n + 2 ? $end + $n + 2 - $at : undef;
    }
    if ($type eq '*') {
        for (1 .. ($n < 0 ? 0 : $n)) {
            my $len = reply_length($buf, $end) // return undef;
            $end += $len;
        }
    }
    return $end - $at;
}

# The bytes Redis sends back for one command.
sub raw_reply {
    my ($redis, @args) = @_;
    my $client = RedisServer::Client->new(port => $redis->port,
        user => $RedisServer::ADMIN_USER, pass => $RedisServer::ADMIN_PASS);
    $client->send_raw(RedisServer::Client::encode(@args));
    my ($buf, $sel) = ('', IO::Select->new($client->{sock}));
    until (defined reply_length($buf)) {
        die "no reply to $args[0]\n" unless $sel->can_read(5);
        sysread($client->{sock}, $buf, 65536, length $buf) or die "closed\n";
    }
    $client->close;
    return $buf;
}

sub write_seed {
    my ($target, $name, $setup, @replies) = @_;
    make_path("$CORPUS/$target");
    open my $fh, '>:raw', "$CORPUS/$target/$name" or die "$name: $!";
    print $fh defined $setup ? "$setup\n" : '', @replies;
    close $fh;
}

# A key's replies until Redis rejects it: `passes` decisions, then one
# more, which is limited.
sub decisions {
    my ($redis, $script, $key, $passes, @argv) = @_;
    return map { raw_reply($redis, 'EVAL', script($script), 1, $key, @argv) }
               0 .. $passes;
}

my $redis = RedisServer->start;

# strict: setup "<algorithm> <rate> <burst> <cost> <round trip> <chunk>"
write_seed('strict_reply', 'gcra', 'gcra 30r/m 15 1 250 16384',
    decisions($redis, 'gcra', 'throttle:reply:{alice}', 16,
              2_000_000, 32_000_000, 16, 1));
write_seed('strict_reply', 'fixed_window', 'fixed_window 10r/s 20 1 250 7',
    decisions($redis, 'fixed_window', 'throttle:fw:{alice}', 30,
              1_000_000, 30, 1));
write_seed('strict_reply', 'sliding_window', 'sliding_window 100r/s 5 2 250 16384',
    decisions($redis, 'sliding_window', 'throttle:sw:{alice}', 52,
              1_000_000, 105, 2));
write_seed('strict_reply', 'sliding_log', 'sliding_log 10r/s 5 1 250 3',
    decisions($redis, 'sliding_log', 'throttle:sl:{alice}', 15,
              1_000_000, 15, 1));
$redis->cmd(qw(SET throttle:wrong:{bob} text));
write_seed('strict_reply', 'errors', 'gcra 30r/m 15 1 250 16384',
    raw_reply($redis, 'EVALSHA', '0' x 40, 1, 'throttle:reply:{bob}',
              2_000_000, 32_000_000, 16, 1),
    raw_reply($redis, 'EVAL', script('sliding_log'), 1,
              'throttle:wrong:{bob}', 1_000_000, 15, 1));

# async: setup "<algorithm> <rate> <burst> <sync_interval> <keys> <round
# trip> <chunk>"; a zone's three keys, charged 0, 1 and 2 units
sub zone_keys { map { RedisServer::async_key('throttle:', $_[0], "k$_") } 0 .. 2 }
write_seed('sync_reply', 'gcra', 'gcra 30r/m 15 100 3 800 16384',
    raw_reply($redis, 'EVAL', script('gcra_sync'), 3, zone_keys('gcra'),
              2_000_000, 200_000, 0, 0, 1, 1000, 2, 2000));
for my $algorithm (qw(fixed_window sliding_window)) {
    # the node's window began as long ago as Redis's: the clocks agree
    my $age = $redis->time_us % 1_000_000;
    write_seed('sync_reply', $algorithm, "$algorithm 10r/s 20 100 3 800 16384",
        raw_reply($redis, 'EVAL', script("${algorithm}_sync"), 3,
                  zone_keys($algorithm),
                  1_000_000, 0, 0, $age, 1, 0, $age, 2, 1, $age));
}

# cluster_reply: Redis's bytes only. Three masters on loopback, node 0
# with two slot ranges, like t/unit/cluster_slots_test.cpp's.
sub start_cluster {
    my @ranges = ([0, 0, 4000], [1, 4001, 9000], [2, 9001, 12000],
                  [0, 12001, 16383]);
    my @buses = map { free_port() } 0 .. 2;
    my @nodes = map {
        RedisServer->start(conf => ['cluster-enabled yes',
                                    'cluster-config-file nodes.conf',
                                    "cluster-port $_"])
    } @buses;
    $nodes[$_->[0]]->cmd('CLUSTER', 'ADDSLOTSRANGE', $_->[1], $_->[2])
        for @ranges;
    $nodes[0]->cmd('CLUSTER', 'MEET', '127.0.0.1', $nodes[$_]->port, $buses[$_])
        for 1, 2;
    wait_until(10, sub {
        !grep { $_->cmd('CLUSTER', 'INFO') !~ /cluster_state:ok/ } @nodes
    }) or die "the cluster did not reach cluster_state:ok\n";
    return @nodes;
}

my @nodes = start_cluster();
write_seed('cluster_reply', 'slots', undef,
           raw_reply($nodes[0], 'CLUSTER', 'SLOTS'));
write_seed('cluster_reply', 'shards', undef,
           raw_reply($nodes[0], 'CLUSTER', 'SHARDS'));
# "c" is in slot 7365, node 1's
write_seed('cluster_reply', 'moved', undef, raw_reply($nodes[0], 'GET', 'c'));
$_->stop for @nodes;

my $replica = RedisServer->start(conf => ['replicaof 127.0.0.1 ' . $redis->port]);
my $sentinel = RedisServer->start(sentinel => 1);
$sentinel->cmd('SENTINEL', 'MONITOR', 'throttle', '127.0.0.1', $redis->port, 1);
write_seed('cluster_reply', 'sentinel', undef,
           raw_reply($sentinel, 'SENTINEL', 'get-master-addr-by-name', 'throttle'),
           raw_reply($sentinel, 'SENTINEL', 'get-master-addr-by-name', 'other'));
write_seed('cluster_reply', 'roles', undef,
           map { raw_reply($_, 'ROLE') } $redis, $replica, $sentinel);
$_->stop for $sentinel, $replica;

$redis->stop;
