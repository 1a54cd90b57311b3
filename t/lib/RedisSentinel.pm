# SPDX-License-Identifier: BSD-2-Clause
package RedisSentinel;

# A Redis master, its replica and three Sentinels, all real redis-server
# processes on loopback, for the integration tests of sentinel= backends.
# Manual: perldoc t/lib/RedisSentinel.pm.

=head1 NAME

RedisSentinel - a master, a replica and three Sentinels for tests

=head1 SYNOPSIS

    use RedisSentinel;

    my $s = RedisSentinel->start;          # master name "mymaster"
    my $p = RedisSentinel->start(password => 's3cret',
                                 sentinel_password => 'watch', tls => 1);

    $s->sentinels;         # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
    $s->master_name;       # for master=
    $s->master;  $s->replica;        # RedisServer objects, as now
    @{ $s->{sentinel} };             # the Sentinels (RedisServer objects)
    $s->master_addr($i);             # "127.0.0.1:P" as Sentinel $i says
    $s->failover;          # SENTINEL FAILOVER; waits for the new master
    $s->start_failover; ...; $s->finish_failover;   # the same, in two
    $s->kill_master;       # SIGKILL; returns the dead master
    $s->wait_for_new_master;         # until the replica is the master
    $s->revive;            # the killed one back, replicating the new one
    $s->intact;            # master and replica both run
    $s->reset;             # FLUSHALL, CONFIG RESETSTAT
    $s->stop;              # every process (also done at END)

=head1 THE SETUP

C<start> runs a master and a replica (C<replicaof> it), both with
C<masteruser>/C<masterauth> as the harness's ACL user (so replication
gets in whatever C<requirepass> the test sets) and
C<repl-diskless-sync-delay 0>, then three C<redis-server --sentinel>
processes with

    sentinel monitor <master_name> 127.0.0.1 <master port> 2
    sentinel down-after-milliseconds <name> <down_after, default 1000>
    sentinel failover-timeout <name> <failover_timeout, default 3000>
    sentinel auth-user/auth-pass <name> harness ...

and waits until each Sentinel sees the master, its replica and the two
other Sentinels, and the replica's link is up.

Options: C<master_name> (default C<mymaster>), C<password> (C<requirepass>
on the master and the replica), C<sentinel_password> (C<requirepass> on
the Sentinels, which also use it with one another), C<tls =E<gt> 1>
(every process TLS only, C<tls-replication yes>; one set of fixtures,
C<< $s->tls >>), C<down_after>, C<failover_timeout> (ms).

=cut

use strict;
use warnings;

use Carp qw(croak);
use File::Temp;
use Processes qw($TIMEOUT wait_until);
use RedisServer;

sub start {
    my ($class, %o) = @_;
    my $tmp = File::Temp->newdir('throttle-sentinel-XXXXXX', TMPDIR => 1);
    my $self = bless {
        tmp         => $tmp,
        master_name => $o{master_name} // 'mymaster',
        tls         => $o{tls} ? RedisServer::tls_fixtures("$tmp/tls") : undef,
    }, $class;
    my %tls = (tls => !!$self->{tls}, tls_fixtures => $self->{tls});
    my @data = (
        "masteruser $RedisServer::ADMIN_USER",
        "masterauth $RedisServer::ADMIN_PASS",
        'repl-diskless-sync-delay 0',
        $self->{tls} ? 'tls-replication yes' : (),
        defined $o{password} ? "requirepass $o{password}" : (),
    );
    $self->{master} = RedisServer->start(conf => \@data, %tls);
    $self->{replica} = RedisServer->start(
        conf => [@data, 'replicaof 127.0.0.1 ' . $self->{master}->port], %tls);
    my $name = $self->{master_name};
    my @watch = (
        "sentinel monitor $name 127.0.0.1 " . $self->{master}->port . ' 2',
        "sentinel down-after-milliseconds $name " . ($o{down_after} // 1000),
        "sentinel failover-timeout $name " . ($o{failover_timeout} // 3000),
        "sentinel auth-user $name $RedisServer::ADMIN_USER",
        "sentinel auth-pass $name $RedisServer::ADMIN_PASS",
        $self->{tls} ? 'tls-replication yes' : (),
        defined $o{sentinel_password} ? "requirepass $o{sentinel_password}" : (),
    );
    $self->{sentinel} = [map {
        RedisServer->start(sentinel => 1, conf => \@watch, %tls)
    } 1 .. 3];
    wait_until($TIMEOUT * 2, sub { $self->ready }, 0.05)
        or croak "the Sentinels did not settle in time:\n" . $self->_report;
    return $self;
}

sub master      { $_[0]{master} }
sub replica     { $_[0]{replica} }
sub master_name { $_[0]{master_name} }
sub tls         { $_[0]{tls} }

sub sentinels {
    my ($self) = @_;
    return join ',', map { '127.0.0.1:' . $_->port } @{ $self->{sentinel} };
}

# A reply of field/value pairs as a hash: an array (RESP) or, through
# redis-cli --raw for TLS, one line per element.
sub _pairs {
    my ($reply) = @_;
    my @flat = ref $reply eq 'ARRAY' ? @$reply : split /\n/, "$reply";
    return { @flat % 2 ? () : @flat };
}

# SENTINEL MASTER <name> as Sentinel $i sees it.
sub master_state {
    my ($self, $i) = @_;
    return _pairs($self->{sentinel}[$i]->cmd('SENTINEL', 'MASTER', $self->{master_name}));
}

# The master's address as Sentinel $i says it: "127.0.0.1:P".
sub master_addr {
    my ($self, $i) = @_;
    my $r = $self->{sentinel}[$i]->cmd('SENTINEL', 'GET-MASTER-ADDR-BY-NAME',
                                        $self->{master_name});
    my @addr = ref $r eq 'ARRAY' ? @$r : split /\n/, "$r";
    return @addr == 2 ? "$addr[0]:$addr[1]" : '';
}

# Whether every Sentinel sees the master as a master with one replica and
# two other Sentinels, and the replica's link is up.
sub ready {
    my ($self) = @_;
    for my $i (0 .. $#{ $self->{sentinel} }) {
        my $m = eval { $self->master_state($i) } or return 0;
        return 0 unless ($m->{flags} // '') eq 'master'
                        && ($m->{'num-slaves'} // 0) == 1
                        && ($m->{'num-other-sentinels'} // 0) == 2
                        && $m->{port} == $self->{master}->port;
    }
    my $info = eval { $self->{replica}->info('replication') } or return 0;
    return ($info->{master_link_status} // '') eq 'up';
}

sub _report {
    my ($self) = @_;
    return join "\n", map {
        my $i = $_;
        "sentinel $i: " . (eval { my $m = $self->master_state($i);
                                  join ' ', map { "$_=$m->{$_}" } sort keys %$m } // $@)
    } 0 .. $#{ $self->{sentinel} };
}

# Whether every Sentinel names $node as the master, and $node says ROLE
# master.
sub _names_master {
    my ($self, $node) = @_;
    my $want = '127.0.0.1:' . $node->port;
    return 0 if grep { (eval { $self->master_addr($_) } // '') ne $want }
                     0 .. $#{ $self->{sentinel} };
    my $role = eval { $node->cmd('ROLE') } // '';
    return (ref $role ? $role->[0] : (split /\n/, $role)[0]) eq 'master';
}

# SENTINEL FAILOVER, then waits until every Sentinel names the replica as
# the master and it says so; then the old master is made its replica and
# waits until every Sentinel sees it as one (a second failover may
# follow). Sentinel itself converts an old master only once it has
# reported itself as a master for failover_timeout, at its 10-second INFO
# pace: REPLICAOF here only hastens what it does. Dies if it takes too
# long.
sub failover {
    my ($self) = @_;
    $self->start_failover;
    return $self->finish_failover;
}

# SENTINEL FAILOVER alone (finish_failover then): for traffic meanwhile.
sub start_failover {
    my ($self) = @_;
    my $r = $self->{sentinel}[0]->cmd('SENTINEL', 'FAILOVER', $self->{master_name});
    croak "SENTINEL FAILOVER: $r" unless "$r" eq 'OK';
}

sub finish_failover {
    my ($self) = @_;
    $self->wait_for_new_master;
    $self->{replica}->cmd('REPLICAOF', '127.0.0.1', $self->{master}->port);
    wait_until($TIMEOUT * 2, sub { $self->ready }, 0.05)
        or croak "the old master did not follow the new one:\n" . $self->_report;
    return $self;
}

# SIGKILL to the master; returns it (wait_for_new_master then).
sub kill_master {
    my ($self) = @_;
    $self->{master}->kill_hard;
    return $self->{master};
}

# Waits until every Sentinel names the replica as the master and it says
# ROLE master; then master is that node and replica the old master.
# Dies if it takes longer than down_after + failover_timeout + $TIMEOUT.
sub wait_for_new_master {
    my ($self, $seconds) = @_;
    my $new = $self->{replica};
    wait_until($seconds // $TIMEOUT * 3, sub { $self->_names_master($new) }, 0.05)
        or croak "no new master in time:\n" . $self->_report;
    @$self{qw(master replica)} = ($new, $self->{master});
    return $new;
}

# The old master killed before wait_for_new_master (the replica now)
# started again, made a replica of the new master; waits until the
# Sentinels see it so and its link is up, so that the master may fail over
# again. Dies if that takes too long.
sub revive {
    my ($self) = @_;
    $self->{replica}->restart;
    $self->{replica}->cmd('REPLICAOF', '127.0.0.1', $self->{master}->port);
    wait_until($TIMEOUT * 2, sub { $self->ready }, 0.05)
        or croak "the old master did not follow the new one:\n" . $self->_report;
    return $self;
}

# Whether the master and the replica both run (none killed by the test).
sub intact { $_[0]{master}->running && $_[0]{replica}->running }

# An empty dataset (FLUSHALL on the master) and zeroed command counts.
sub reset {
    my ($self) = @_;
    $self->{master}->cmd('FLUSHALL');
    $_->cmd('CONFIG', 'RESETSTAT') for @$self{qw(master replica)};
    return $self;
}

sub stop {
    my ($self) = @_;
    $_->stop for @{ $self->{sentinel} }, grep { $_ } @$self{qw(master replica)};
}

sub log {
    my ($self) = @_;
    my $i = 0;
    return join "\n", map { '--- ' . $_->[0] . ":\n" . $_->[1]->log }
        (['master', $self->{master}], ['replica', $self->{replica}],
         map { ['sentinel ' . $i++, $_] } @{ $self->{sentinel} });
}

1;
