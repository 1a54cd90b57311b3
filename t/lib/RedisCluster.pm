# SPDX-License-Identifier: BSD-2-Clause
package RedisCluster;

# A real Redis Cluster on loopback for the integration tests: redis-server
# processes with cluster-enabled yes (RedisServer objects), joined by
# redis-cli --cluster create; failover by SIGKILL, resharding by redis-cli
# --cluster reshard. Manual: perldoc t/lib/RedisCluster.pm.

=head1 NAME

RedisCluster - a Redis Cluster of real redis-server processes for tests

=head1 SYNOPSIS

    use RedisCluster;

    my $c = RedisCluster->start;            # 3 masters + 3 replicas
    my $t = RedisCluster->start(tls => 1, conf => ['requirepass s3cret']);
    my $h = RedisCluster->start(node_conf => sub {
        "cluster-announce-hostname node$_[0].example" });

    $c->seeds;                    # "127.0.0.1:P1,127.0.0.1:P2,..." (cluster=)
    $c->masters;  $c->replicas;   # RedisServer objects (masters: see below)
    $c->slot_of('alice');         # CLUSTER KEYSLOT
    $c->master_of_key('alice');   # the master that owns that slot
    $c->master_index_of_key('alice');   # its index in masters
    $c->slots_of($master);        # [[first, last], ...]
    $c->kill_master(0);           # SIGKILL; returns the dead master
    $c->revive($dead);            # back, a replica again, in sync
    $c->wait_for_failover;        # until a replica serves its slots
    $c->reshard(from => 0, to => 1, slots => 100);          # blocking
    my $job = $c->reshard(from => 0, to => 1, slots => 100,
                          background => 1);
    $c->busy($job);               # whether it still runs
    $c->finish($job);             # (exit code, redis-cli's output)
    $c->command_counts;           # [{ port, evalsha, eval, asking }, ...]
    $c->reset;                    # FLUSHALL + CONFIG RESETSTAT everywhere
    $c->intact;                   # every node still runs
    $c->stop;                     # every node (also done at END)

=head1 THE CLUSTER

C<start> runs C<masters> (default 3) x (1 + C<replicas>, default 1)
redis-server processes (RedisServer, so: 127.0.0.1, a free port, the
C<harness> ACL user, bounded waits, killed at END) with

    cluster-enabled yes
    cluster-port <another free port>    (no need for port + 10000 free)
    cluster-node-timeout <node_timeout, default 1000 ms>
    cluster-replica-validity-factor 0   (a replica may always take over)
    cluster-require-full-coverage no    (a dead master stops its own
                                         slots, not the whole cluster)
    repl-diskless-sync-delay 0          (replicas in sync at once)
    masteruser harness, masterauth      (replication gets in whatever
                                         requirepass the test sets)

then C<redis-cli --cluster create ... --cluster-replicas R --cluster-yes>,
and waits until every node says C<cluster_state:ok>, all agree on who
owns which slot (and on the host names nodes announce), and every
replica's link to its master is up.

Options: C<conf =E<gt> [LINES]> (extra redis.conf lines for every node,
e.g. C<requirepass s3cret>), C<node_conf =E<gt> sub { my ($i) = @_; LINES }>
(extra lines for node C<$i>, the nodes numbered from 0 as they start),
C<tls =E<gt> 1> (TLS only: C<tls-port>, C<tls-cluster yes>,
C<tls-replication yes>; one set of fixtures for every node,
C<< $c->tls >>), C<masters>, C<replicas>, C<node_timeout> (ms).

The nodes are read with C<CLUSTER NODES> (a text reply: the same parsing
with and without TLS, where commands go through redis-cli).

=cut

use strict;
use warnings;

use Carp qw(croak);
use File::Temp;
use Processes qw($TIMEOUT wait_until free_port run_cmd fork_child exited
                 kill_wait read_file);
use RedisServer;

sub start {
    my ($class, %o) = @_;
    my $masters = $o{masters} // 3;
    my $replicas = $o{replicas} // 1;
    my $tmp = File::Temp->newdir('throttle-cluster-XXXXXX', TMPDIR => 1);
    my $self = bless {
        tmp          => $tmp,
        node_timeout => $o{node_timeout} // 1000,
        tls          => $o{tls} ? RedisServer::tls_fixtures("$tmp/tls") : undef,
        conf         => ref $o{conf} ? $o{conf} : [grep { length } split /\n/, $o{conf} // ''],
        node_conf    => $o{node_conf} // sub { () },
        nodes        => [],
    }, $class;
    push @{ $self->{nodes} }, $self->_start_node($_)
        for 0 .. $masters * (1 + $replicas) - 1;
    # nodes that announce a host name: stable() waits until each node
    # knows them all
    $self->{named} = grep {
        grep { /^cluster-announce-hostname\s/ } $self->{node_conf}->($_)
    } 0 .. $#{ $self->{nodes} };
    $self->_create($replicas);
    # redis-cli returns before every node has heard which nodes are
    # replicas: until then some see six masters
    wait_until($TIMEOUT * 2, sub {
        $self->stable && $self->_replicas_known($masters * $replicas)
    }, 0.05) or croak "the cluster did not settle in time:\n" . $self->_state_report;
    $self->_number_shards;
    return $self;
}

sub _start_node {
    my ($self, $index) = @_;
    my @conf = (
        'cluster-enabled yes',
        'cluster-config-file nodes.conf',
        "cluster-node-timeout $self->{node_timeout}",
        'cluster-replica-validity-factor 0',
        'cluster-require-full-coverage no',
        'repl-diskless-sync-delay 0',
        "masteruser $RedisServer::ADMIN_USER",
        "masterauth $RedisServer::ADMIN_PASS",
        $self->{tls} ? ('tls-cluster yes', 'tls-replication yes') : (),
        @{ $self->{conf} },
        $self->{node_conf}->($index),
    );
    # the bus port is picked free too, and may be taken meanwhile
    for my $attempt (1 .. 3) {
        my $node = eval {
            RedisServer->start(conf => [@conf, 'cluster-port ' . free_port()],
                               tls => !!$self->{tls},
                               tls_fixtures => $self->{tls});
        };
        return $node if $node;
        die $@ if $attempt == 3 || $@ !~ /Address already in use/;
    }
}

# redis-cli with the harness's credentials (and TLS when the nodes have
# it), then ARGS.
sub cli_args {
    my ($self, @args) = @_;
    my $t = $self->{tls};
    return ($RedisServer::CLI, '--no-auth-warning',
            '--user', $RedisServer::ADMIN_USER,
            '--pass', $RedisServer::ADMIN_PASS,
            $t ? ('--tls', '--cacert', $t->{ca}) : (), @args);
}

sub _create {
    my ($self, $replicas) = @_;
    my @addrs = map { '127.0.0.1:' . $_->port } @{ $self->{nodes} };
    my ($rc, $out) = run_cmd([$self->cli_args(
        '--cluster', 'create', @addrs,
        '--cluster-replicas', $replicas, '--cluster-yes')], $TIMEOUT * 4);
    croak "redis-cli --cluster create failed ($rc):\n$out" if $rc != 0;
}

sub tls   { $_[0]{tls} }
sub nodes { @{ $_[0]{nodes} } }
sub node_timeout { $_[0]{node_timeout} }

# The nodes still running (not killed by the test).
sub live_nodes { grep { $_->running } @{ $_[0]{nodes} } }

sub seeds {
    my ($self) = @_;
    return join ',', map { '127.0.0.1:' . $_->port } $self->live_nodes;
}

sub node_at_port {
    my ($self, $port) = @_;
    my ($n) = grep { $_->port == $port } @{ $self->{nodes} };
    return $n;
}

# ---------------------------------------------------------------------------
# What the nodes say

# CLUSTER NODES of $node as a list of { id, port, hostname (announced, or
# ''), flags => { master, slave, fail, myself... }, master_id, slots =>
# [[first, last], ...] } (slots being migrated or imported left out).
sub cluster_nodes {
    my ($self, $node) = @_;
    my @out;
    for my $line (split /\n/, '' . $node->cmd('CLUSTER', 'NODES')) {
        my ($id, $addr, $flags, $master, undef, undef, undef, undef, @slots)
            = split ' ', $line;
        next unless $addr && $addr =~ /:(\d+)@/;
        my $port = $1;
        push @out, {
            id => $id, port => $port, master_id => $master,
            hostname => $addr =~ /,(.+)$/ ? $1 : '',
            flags => { map { $_ => 1 } split /,/, $flags },
            slots => [map { /^(\d+)(?:-(\d+))?$/ ? [$1, $2 // $1] : () } @slots],
        };
    }
    return @out;
}

# The serving masters as one node sees them: { port => [[first, last]...] }
# for every master not flagged fail that owns slots.
sub slot_owners {
    my ($self, $node) = @_;
    my %owners;
    for my $n ($self->cluster_nodes($node)) {
        next unless $n->{flags}{master} && !$n->{flags}{fail}
                    && !$n->{flags}{'fail?'} && @{ $n->{slots} };
        $owners{ $n->{port} } = [sort { $a->[0] <=> $b->[0] } @{ $n->{slots} }];
    }
    return \%owners;
}

sub _owners_text {
    my ($owners) = @_;
    return join ' ', map {
        my $p = $_;
        map { "$_->[0]-$_->[1]:$p" } @{ $owners->{$p} }
    } sort { $a <=> $b } keys %$owners;
}

# The live masters (RedisServer objects) in a fixed order: that of the
# slots they owned when the cluster was made; a promoted replica takes its
# old master's place, a master that gave its slots away keeps its own.
sub masters {
    my ($self) = @_;
    my ($any) = $self->live_nodes;
    my $shard = $self->{shard_of_id};
    my @masters = grep {
        $_->{flags}{master} && !$_->{flags}{fail}
            && $self->node_at_port($_->{port})->running
    } $self->cluster_nodes($any);
    return map { $self->node_at_port($_->{port}) }
           sort { $shard->{ $a->{id} } <=> $shard->{ $b->{id} } } @masters;
}

# Which shard each node belongs to (0 for the master with the lowest
# slots and its replicas...): the order of masters.
sub _number_shards {
    my ($self) = @_;
    my @nodes = $self->cluster_nodes(($self->live_nodes)[0]);
    my @masters = sort { $a->{slots}[0][0] <=> $b->{slots}[0][0] }
                  grep { $_->{flags}{master} } @nodes;
    my %index = map { $masters[$_]{id} => $_ } 0 .. $#masters;
    $self->{shard_of_id} = { map {
        $_->{id} => $index{ $_->{flags}{master} ? $_->{id} : $_->{master_id} }
    } @nodes };
}

sub replicas {
    my ($self) = @_;
    my ($any) = $self->live_nodes;
    my %replica = map { $_->{flags}{slave} ? ($_->{port} => 1) : () }
                  $self->cluster_nodes($any);
    return grep { $replica{ $_->port } } $self->live_nodes;
}

sub slots_of {
    my ($self, $master) = @_;
    my ($any) = $self->live_nodes;
    return $self->slot_owners($any)->{ $master->port } || [];
}

sub slot_of {
    my ($self, $key) = @_;
    my ($any) = $self->live_nodes;
    return 0 + $any->cmd('CLUSTER', 'KEYSLOT', $key);
}

sub master_index_of_key {
    my ($self, $key) = @_;
    my $slot = $self->slot_of($key);
    my @masters = $self->masters;
    for my $i (0 .. $#masters) {
        return $i if grep { $slot >= $_->[0] && $slot <= $_->[1] }
                          @{ $self->slots_of($masters[$i]) };
    }
    croak "no master owns slot $slot (key $key)";
}

sub master_of_key {
    my ($self, $key) = @_;
    return ($self->masters)[ $self->master_index_of_key($key) ];
}

# ---------------------------------------------------------------------------
# Waiting for the cluster

# Whether every live node says cluster_state:ok, all see the same owner
# for each of the 16384 slots, and every replica's link is up.
sub stable {
    my ($self) = @_;
    my %views;
    for my $n ($self->live_nodes) {
        my $info = eval { '' . $n->cmd('CLUSTER', 'INFO') } // '';
        return 0 unless $info =~ /^cluster_state:ok\r?$/m;
        my $owners = $self->slot_owners($n);
        my $covered = 0;
        $covered += $_->[1] - $_->[0] + 1 for map { @$_ } values %$owners;
        return 0 unless $covered == 16384;
        return 0 if grep { !$self->node_at_port($_)->running } keys %$owners;
        # a host name reaches the other nodes with the pings: until then
        # a node's slot map names some masters by address only
        my @named = grep { $_->{hostname} ne '' } $self->cluster_nodes($n);
        return 0 if @named < ($self->{named} // 0);
        my $names = join ' ', map { "$_->{port}=$_->{hostname}" }
            sort { $a->{port} <=> $b->{port} } @named;
        $views{ _owners_text($owners) . " $names" } = 1;
    }
    return 0 unless keys %views == 1;
    for my $r ($self->replicas) {
        my $info = eval { $r->info('replication') } or return 0;
        return 0 unless ($info->{master_link_status} // '') eq 'up';
    }
    return 1;
}

# Whether every live node sees $n replicas.
sub _replicas_known {
    my ($self, $n) = @_;
    for my $node ($self->live_nodes) {
        my $seen = grep { $_->{flags}{slave} } $self->cluster_nodes($node);
        return 0 unless $seen == $n;
    }
    return 1;
}

sub wait_stable {
    my ($self, $seconds) = @_;
    return wait_until($seconds // $TIMEOUT * 2, sub { $self->stable }, 0.05);
}

sub _state_report {
    my ($self) = @_;
    return join "\n", map {
        my $n = $_;
        "node " . $n->port . ":\n" . (eval { '' . $n->cmd('CLUSTER', 'NODES') } // $@)
    } $self->live_nodes;
}

# ---------------------------------------------------------------------------
# Failover, resharding

# SIGKILL to master $i (masters order); returns it.
sub kill_master {
    my ($self, $i) = @_;
    my $m = ($self->masters)[$i] or croak "no master $i";
    $m->kill_hard;
    return $m;
}

# Waits until the killed masters' slots are served by their replicas
# (every live node agrees, cluster_state:ok); true if it happened within
# $seconds (default: node timeout + $TIMEOUT).
sub wait_for_failover {
    my ($self, $seconds) = @_;
    $seconds //= $self->{node_timeout} / 1000 + $TIMEOUT;
    return wait_until($seconds, sub {
        my ($any) = $self->live_nodes;
        my $owners = $self->slot_owners($any);
        return !grep({ !$self->node_at_port($_)->running } keys %$owners)
            && $self->stable;
    }, 0.05);
}

# A killed node started again (its nodes.conf kept): waits until it is a
# replica whose link to its master is up and the cluster is stable, so
# that its master may fail over again; true if it happened in time.
sub revive {
    my ($self, $node) = @_;
    $node->restart;
    return wait_until($TIMEOUT * 2, sub {
        my $info = eval { $node->info('replication') } or return 0;
        return ($info->{role} // '') eq 'slave'
            && ($info->{master_link_status} // '') eq 'up'
            && $self->stable;
    }, 0.05);
}

# Whether every node still runs (none killed by the test).
sub intact { !grep { !$_->running } @{ $_[0]{nodes} } }

# redis-cli --cluster reshard: moves `slots` slots from master `from` to
# master `to` (indexes in masters order); redis-cli takes the lowest slots
# of the source first. Blocking: returns once every node agrees (dies if
# redis-cli fails); with background => 1 returns a job for finish().
sub reshard {
    my ($self, %o) = @_;
    my @masters = $self->masters;
    my ($from, $to) = @masters[ $o{from}, $o{to} ];
    croak 'reshard: no such master' unless $from && $to;
    my @cmd = $self->cli_args(
        '--cluster', 'reshard', '127.0.0.1:' . $from->port,
        '--cluster-from', $from->cmd('CLUSTER', 'MYID'),
        '--cluster-to', $to->cmd('CLUSTER', 'MYID'),
        '--cluster-slots', $o{slots}, '--cluster-yes',
        '--cluster-pipeline', $o{pipeline} // 10);
    my $out = File::Temp->new(TMPDIR => 1);
    my $pid = fork_child(sub {
        open STDOUT, '>', $out->filename;
        open STDERR, '>&', \*STDOUT;
        exec @cmd;
    });
    my $job = { pid => $pid, out => $out };
    return $job if $o{background};
    my ($rc, $text) = $self->finish($job);
    croak "redis-cli --cluster reshard failed ($rc):\n$text" if $rc != 0;
    return ($rc, $text);
}

# Whether a background reshard still runs.
sub busy {
    my ($self, $job) = @_;
    return 0 if exists $job->{rc};
    return 1 unless exited($job->{pid});
    $job->{rc} = $? >> 8;
    return 0;
}

# Waits for a background reshard: (exit code, -1 if it did not end in
# time or the nodes did not agree afterwards; its output).
sub finish {
    my ($self, $job, $seconds) = @_;
    unless (wait_until($seconds // $TIMEOUT * 6, sub { !$self->busy($job) }, 0.02)) {
        kill_wait($job->{pid}, 'KILL');
        $job->{rc} = -1;
    }
    my $rc = $self->wait_stable ? $job->{rc} : -1;
    return ($rc, read_file($job->{out}->filename));
}

# ---------------------------------------------------------------------------
# Counting, resetting, stopping

# Per master (masters order): { port, evalsha, eval, asking } calls since
# the start or the last reset.
sub command_counts {
    my ($self) = @_;
    return [map {
        my $m = $_;
        +{ port => $m->port, map { $_ => $m->calls($_) } qw(evalsha eval asking) }
    } $self->masters];
}

# An empty dataset and zeroed command counts on every live node.
sub reset {
    my ($self) = @_;
    for my $m ($self->masters) {
        $m->cmd('FLUSHALL');
    }
    $_->cmd('CONFIG', 'RESETSTAT') for $self->live_nodes;
    return $self;
}

sub stop {
    my ($self) = @_;
    $_->stop for @{ $self->{nodes} };
}

sub log { join "\n", map { '--- node ' . $_->port . ":\n" . $_->log } @{ $_[0]{nodes} } }

1;
