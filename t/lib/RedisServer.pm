# SPDX-License-Identifier: BSD-2-Clause
package RedisServer;

# Real redis-server processes for the integration tests and TLS fixtures
# made with openssl; loads the small RESP client (RedisServer/Client.pm)
# and the fake servers for the faults a real Redis cannot produce
# (RedisServer/Fake.pm). Manual: perldoc t/lib/RedisServer.pm.

=head1 NAME

RedisServer - real redis-server processes (and fault injectors) for tests

=head1 SYNOPSIS

    use RedisServer;

    my $r = RedisServer->start;                     # plain, on a free port
    my $t = RedisServer->start(tls => 1);           # TLS only (--port 0)
    my $a = RedisServer->start(conf => [
        'user alice on >secret ~* &* +@all',
    ]);

    $r->port;                          # where it listens (TLS port for tls)
    $r->cmd(qw(SET k v));              # a reply (see REPLIES)
    $r->calls('evalsha');              # INFO commandstats: calls so far
    $r->scripts_run;                   # EVALSHA + EVAL that did not fail
    $r->script_calls;                  # EVALSHA + EVAL received
    $r->pause;  $r->resume;            # SIGSTOP / SIGCONT
    $r->restart;                       # stop, start again on the same port
    $r->kill_hard;                     # SIGKILL: no goodbye to clients
    $r->kill_when_synced({ $key => 1 }, 2);  # ... once nothing is in flight
    $r->atomically([qw(TIME)], [qw(GET k)]);   # replies, at one instant
    $r->time_us;                       # Redis TIME in microseconds
    $r->sync_calls;                    # async syncs in SLOWLOG, and units
    $r->synced({ $key => 10 });        # sent, then synced once more
    $r->keys_matching('throttle:*', $db);   # SCAN, sorted
    RedisServer::async_key('throttle:', 'z', 'alice');  # an async zone's
                                       # key: 'throttle:{z:13}:alice'
    RedisServer::script_source('gcra');   # a script as the module sends it
    RedisServer::script_sha('gcra');      # ... and the SHA1 EVALSHA names
    $r->stop;                          # TERM, then KILL; also done at END
    $r->log;                           # the server's log file, as text

    my $f = RedisServer::Fake->start('garbage');   # 'silent', 'ok', 'short'
    $f->port; $f->stop;                            # (see RedisServer::Fake)
    RedisServer::Closed->new->port;                # nothing listens there

    my $tls = RedisServer::tls_fixtures($dir);     # CA, server cert, other CA

=head1 SERVERS

Each server runs C<redis-server> (C<TEST_REDIS_SERVER>, default
F</usr/bin/redis-server>) in the foreground as a child of the test, bound
to 127.0.0.1 on a port picked at run time (another one if some other
process took it first), with its own temporary
directory (config, log), C<--save '' --appendonly no>. Every wait is
bounded (C<TEST_THROTTLE_TIMEOUT> seconds, default 5). Every server and
fake still running when the test exits is killed (SIGCONT first, then
SIGKILL) by an END block.

Options of C<start>:

=over

=item conf => [LINES] or TEXT

Extra redis.conf lines (C<requirepass secret>, C<user alice on E<gt>secret
~* &* +@all>, ...).

=item tls => 1

C<--port 0 --tls-port P> with a server certificate for C<localhost> and
127.0.0.1 signed by a test CA (C<tls_auth_clients no>). C<< $r->tls >>
is the fixture set (see C<tls_fixtures>); the harness talks to it with
C<redis-cli --tls>.

=item port => P

A fixed port (a restart keeps its port anyway).

=item sentinel => 1

C<redis-server --sentinel>: a Sentinel (its C<sentinel ...> lines come
with C<conf>; it rewrites its configuration file as it learns).

=back

The harness connects as its own ACL user C<harness> (added to every
server's configuration), so C<requirepass> and extra users never lock it
out.

=head1 REPLIES

C<cmd> returns simple and bulk strings as strings, integers as numbers,
nil as undef, arrays as array refs, and error replies as
C<RedisServer::Error> objects, which stringify to the message (C<"NOSCRIPT
No matching script...">). It dies when the server cannot be reached or
does not answer in time. For TLS servers C<cmd> runs C<redis-cli --tls
--raw> and returns its output trimmed (one line per element for arrays).

=cut

use strict;
use warnings;

use Carp qw(croak);
use Digest::SHA qw(sha1_hex sha256);
use File::Basename qw(dirname);
use File::Temp;
use Processes qw($TIMEOUT wait_until free_port read_file fork_child exited
                 kill_wait run_cmd closed_by_peer);
use RedisServer::Client;
use RedisServer::Fake;

our $SERVER  = $ENV{TEST_REDIS_SERVER} || '/usr/bin/redis-server';
our $CLI     = $ENV{TEST_REDIS_CLI}    || '/usr/bin/redis-cli';

our $ADMIN_USER = 'harness';
our $ADMIN_PASS = 'harness-secret';

sub available { return -x $SERVER && -x $CLI }

# ---------------------------------------------------------------------------
# Servers

sub start {
    my ($class, %o) = @_;
    croak "redis-server not found at $SERVER" unless -x $SERVER;

    my $dir = File::Temp->newdir('throttle-redis-XXXXXX', TMPDIR => 1);
    my $self = bless {
        dir   => $dir,
        path  => "$dir",
        port  => $o{port} || free_port(),
        extra => ref $o{conf} ? join("\n", @{ $o{conf} }) : ($o{conf} // ''),
        tls   => $o{tls} ? ($o{tls_fixtures} || tls_fixtures("$dir/tls")) : undef,
        sentinel => $o{sentinel},
    }, $class;

    # a port picked free can be taken before the server binds it (other
    # processes connect and listen meanwhile): then another one, unless
    # the caller chose it
    for my $attempt (1 .. 3) {
        $self->_write_conf;
        return $self if eval { $self->_run; 1 };
        my $err = $@;
        die $err if $o{port} || $attempt == 3
                    || $err !~ /Address already in use/;
        $self->{port} = free_port();
    }
}

sub _write_conf {
    my ($self) = @_;
    my $p = $self->{path};
    my $conf = "bind 127.0.0.1\n"
             . "dir $p\n"
             . "logfile $p/redis.log\n"
             . "daemonize no\n"
             . "save \"\"\n"
             . "appendonly no\n"
             . "user $ADMIN_USER on >$ADMIN_PASS ~* &* +\@all\n";
    if (my $t = $self->{tls}) {
        $conf .= "port 0\n"
               . "tls-port $self->{port}\n"
               . "tls-cert-file $t->{cert}\n"
               . "tls-key-file $t->{key}\n"
               . "tls-ca-cert-file $t->{ca}\n"
               . "tls-auth-clients no\n";
    } else {
        $conf .= "port $self->{port}\n";
    }
    $conf .= "$self->{extra}\n";
    open my $fh, '>', "$p/redis.conf" or die "$p/redis.conf: $!";
    print $fh $conf;
    close $fh;
}

sub _run {
    my ($self) = @_;
    my @cmd = ($SERVER, "$self->{path}/redis.conf",
               $self->{sentinel} ? '--sentinel'
                                 : ('--save', '', '--appendonly', 'no'));
    $self->{pid} = fork_child(sub {
        open STDOUT, '>', '/dev/null';
        # stderr stays: redis-server reports bad configuration there
        exec @cmd;
    });
    my $err = '';
    return if wait_until($TIMEOUT, sub {
        if (exited($self->{pid})) {
            delete $self->{pid};
            die "redis-server exited at start:\n" . $self->log;
        }
        my $pong = eval { $self->cmd('PING') };
        $err = $@;
        return defined $pong && "$pong" eq 'PONG';
    });
    $self->stop;
    die "redis-server on port $self->{port} not ready after ${TIMEOUT}s: "
        . "$err\n" . $self->log;
}

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }
sub dir  { $_[0]{path} }
sub tls  { $_[0]{tls} }
sub running { my $p = $_[0]{pid}; return $p && !exited($p) }

sub log { read_file("$_[0]{path}/redis.log") }

sub stop { $_[0]->_end('TERM') }

# SIGKILL: no goodbye to the clients.
sub kill_hard { $_[0]->_end('KILL') }

# kill_hard at a moment when the module has nothing on its way to or from
# Redis, so that the first sync to fail is one that cannot connect: a
# sync in flight when Redis dies fails otherwise, and says why ("recv
# failed", "connection closed by Redis") before any connect is refused.
# Once each key of $want (as synced() takes it) has had its syncs, the
# zones send nothing until they charge again; a round trip then lets Redis
# write the reply to the last one (it writes the replies it owes before it
# reads more input); after the kill, the wait is for the module to close
# its ends of the connections, now idle, which it does without a failure.
# True if each wait ended within $seconds.
sub kill_when_synced {
    my ($self, $want, $seconds) = @_;
    my $synced = wait_until($seconds, sub { $self->synced($want) });
    $self->cmd('PING');
    my $port = $self->port;
    $self->kill_hard;
    return $synced
        && wait_until($seconds, sub { !closed_by_peer($port) });
}

sub _end {
    my ($self, $signal) = @_;
    $self->_drop_client;
    kill_wait(delete $self->{pid}, $signal) if $self->{pid};
    delete $self->{paused};
    return $self;
}

# Stops the server (if running) and starts a new one on the same port, with
# the same configuration: an empty dataset and an empty script cache.
sub restart {
    my ($self) = @_;
    $self->stop;
    $self->_run;
    return $self;
}

sub pause {
    my ($self) = @_;
    $self->_drop_client;
    kill 'STOP', $self->{pid} or die "SIGSTOP $self->{pid}: $!";
    $self->{paused} = 1;
    return $self;
}

sub resume {
    my ($self) = @_;
    kill 'CONT', $self->{pid} or die "SIGCONT $self->{pid}: $!";
    delete $self->{paused};
    return $self;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop if $self->{pid};
}

# ---------------------------------------------------------------------------
# Commands

sub _drop_client {
    my ($self) = @_;
    my $c = delete $self->{client};
    $c->close if $c;
}

sub client {
    my ($self) = @_;
    croak 'client: a TLS server is reached with cmd (redis-cli)'
        if $self->{tls};
    return $self->{client} ||= RedisServer::Client->new(
        port => $self->{port},
        user => $ADMIN_USER,
        pass => $ADMIN_PASS,
    );
}

sub cmd {
    my ($self, @args) = @_;
    croak "cmd on a stopped (SIGSTOP) server would wait" if $self->{paused};
    return $self->_cli(@args) if $self->{tls};
    my $cached = $self->{client};
    my $reply = eval { $self->client->cmd(@args) };
    if (my $e = $@) {
        $self->_drop_client;    # a half-read reply must not confuse the next
        # the server closed our idle connection (its "timeout", CLIENT
        # KILL): the command never ran; once more on a new connection
        die $e unless $cached && $e =~ /closed the connection|write to redis|read from redis/;
        $reply = eval { $self->client->cmd(@args) };
        if ($e = $@) {
            $self->_drop_client;
            die $e;
        }
    }
    return $reply;
}

# Commands run at one instant (MULTI ... EXEC): their replies, in order.
sub atomically {
    my ($self, @cmds) = @_;
    my $c = $self->client;
    $c->cmd('MULTI');
    $c->cmd(@$_) for @cmds;
    my $replies = $c->cmd('EXEC');
    die "EXEC: $replies\n" unless ref $replies eq 'ARRAY';
    return @$replies;
}

# A fresh connection per call: for commands that change connection state.
sub cmd_once {
    my ($self, @args) = @_;
    my $c = RedisServer::Client->new(port => $self->{port},
                                     user => $ADMIN_USER, pass => $ADMIN_PASS);
    my $r = $c->cmd(@args);
    $c->close;
    return $r;
}

sub _cli {
    my ($self, @args) = @_;
    my $t = $self->{tls};
    my @cmd = ($CLI, '--no-auth-warning', '--raw', '-h', '127.0.0.1',
               '-p', $self->{port}, '--user', $ADMIN_USER,
               '--pass', $ADMIN_PASS, '--tls', '--cacert', $t->{ca}, @args);
    my ($rc, $out) = run_cmd(\@cmd);
    die "redis-cli failed ($rc): $out" if $rc != 0;
    $out =~ s/\s+\z//;
    return $out;
}

# INFO commandstats as { cmd => { calls => N, usec => N, failed_calls ...} }
sub commandstats {
    my ($self) = @_;
    my $info = $self->cmd('INFO', 'commandstats');
    my %stats;
    for my $line (split /\r?\n/, "$info") {
        my ($name, $fields) = $line =~ /^cmdstat_([^:]+):(.*)$/ or next;
        for my $kv (split /,/, $fields) {
            my ($k, $v) = split /=/, $kv, 2;
            $stats{ lc $name }{$k} = $v;
        }
    }
    return \%stats;
}

# How many times a command was called since the server started.
sub calls {
    my ($self, $name) = @_;
    return $self->commandstats->{ lc $name }{calls} // 0;
}

# Scripts that ran: EVALSHA and EVAL calls that did not fail (a NOSCRIPT
# EVALSHA counts as a failed call, and the EVAL that follows as a run).
sub scripts_run {
    my ($self) = @_;
    my $st = $self->commandstats;
    my $n = 0;
    for my $c (qw(evalsha eval)) {
        my $s = $st->{$c} or next;
        # Redis 7: "calls" excludes rejected calls (NOAUTH, NOPERM...) and
        # includes failed ones (NOSCRIPT, script errors)
        $n += $s->{calls} - ($s->{failed_calls} // 0);
    }
    return $n;
}

# Script commands received, whatever came of them: EVALSHA + EVAL calls,
# rejected ones included.
sub script_calls {
    my ($self) = @_;
    my $st = $self->commandstats;
    my $n = 0;
    for my $c (qw(evalsha eval)) {
        $n += ($st->{$c}{calls} // 0) + ($st->{$c}{rejected_calls} // 0);
    }
    return $n;
}

# Scripts sent to a paused server (CLIENT PAUSE WRITE) and waiting there:
# a client blocked on one counts it, and one more if further commands wait
# in its query buffer (a connection pipelines its calls).
sub scripts_waiting {
    my ($self) = @_;
    my $n = 0;
    for (split /\r?\n/, '' . $self->cmd_once('CLIENT', 'LIST')) {
        next unless /\bflags=\w*b/ && /\bcmd=eval(?:sha)?\b/;
        $n += /\bqbuf=0\b/ ? 1 : 2;
    }
    return $n;
}

# INFO SECTION as { field => value }.
sub info {
    my ($self, $section) = @_;
    my %h;
    for my $line (split /\r?\n/, '' . $self->cmd('INFO', $section // 'all')) {
        my ($k, $v) = $line =~ /^([^#:][^:]*):(.*)$/ or next;
        $h{$k} = $v;
    }
    return \%h;
}

# Redis TIME in microseconds.
sub time_us {
    my ($self) = @_;
    my $t = $self->cmd('TIME');
    my ($s, $us) = ref $t ? @$t : split /\n/, $t;
    return $s * 1_000_000 + $us;
}

# ---------------------------------------------------------------------------
# Async mode's syncs, as SLOWLOG shows them (for a server started with
# slowlog-log-slower-than 0; SLOWLOG keeps 32 arguments of a command, the
# first 128 bytes of each)

# Where a sync call's ARGV (0-based) says the units of its key $i
# (1-based): gcra_sync.lua's ARGV[2i + 1]; the window syncs' ARGV[3i - 1]
# (this window) plus ARGV[3i] (the one before). Undef when SLOWLOG did not
# keep them.
my %SYNC_UNITS = (
    gcra_sync           => sub { $_[0][2 * $_[1]] },
    fixed_window_sync   => \&window_sync_units,
    sliding_window_sync => \&window_sync_units,
);

sub window_sync_units {
    my ($argv, $i) = @_;
    my ($cur, $prev) = @$argv[3 * $i - 2, 3 * $i - 1];
    return defined $prev ? $cur + $prev : undef;
}

my %SYNC_BY_SHA;    # SHA1 of a sync script as sent => its name

# The sync calls Redis ran, oldest first: { id (SLOWLOG's), cmd (EVALSHA or
# EVAL), script (its name), port (the client's), nkeys, keys => [the keys
# SLOWLOG kept], units => { key => units it sent } (where SLOWLOG kept
# them) }. An EVAL is known by the EVALSHA it retries (the same keys and
# ARGV, answered NOSCRIPT: that one did not run); SLOWLOG keeps too little
# of its source to tell. (SLOWLOG does not say what a call answered: an
# EVALSHA answered NOSCRIPT counts as run until its EVAL is logged.)
sub sync_calls {
    my ($self) = @_;
    %SYNC_BY_SHA = map { script_sha($_) => $_ } keys %SYNC_UNITS
        unless %SYNC_BY_SHA;
    my $log = $self->cmd('SLOWLOG', 'GET', '-1');
    die "SLOWLOG GET: $log\n" unless ref $log eq 'ARRAY';
    my (@calls, %unanswered);
    for my $entry (reverse @$log) {
        my ($id, $args, $client) = @$entry[0, 3, 4];
        my ($cmd, $script, $nkeys, @rest) = @$args;
        $cmd = uc $cmd;
        my $same = join "\0", $nkeys // '', @rest;
        my $call = { id => $id, cmd => $cmd, nkeys => $nkeys,
                     port => ($client =~ /:(\d+)$/)[0] };
        if ($cmd eq 'EVALSHA' && $SYNC_BY_SHA{$script}) {
            $call->{script} = $SYNC_BY_SHA{$script};
            $unanswered{$same} = $call;
        } elsif ($cmd eq 'EVAL' && (my $tried = delete $unanswered{$same})) {
            $tried->{noscript} = 1;
            $call->{script} = $tried->{script};
        } else {
            next;
        }
        my @kept = grep { !/^\.\.\. \(\d+ more arguments\)$/ } @rest;
        my @argv = @kept[$nkeys .. $#kept];
        $call->{keys} = [grep { defined } @kept[0 .. $nkeys - 1]];
        for my $i (1 .. @{ $call->{keys} }) {
            my $units = $SYNC_UNITS{ $call->{script} }->(\@argv, $i);
            $call->{units}{ $call->{keys}[$i - 1] } = $units if defined $units;
        }
        push @calls, $call;
    }
    return grep { !$_->{noscript} } @calls;
}

# Whether each key of $want (key => units) has had its units sent, exactly
# that many in all, and been synced once more since by every node that
# sent it any: the last sync of each for the key sent nothing (its second
# sync, which only reads what the other nodes charged, has run). Options:
# nodes => code returning [[client ports of node 1], ...]
# (Processes::local_ports_of its workers; without it every call is one
# node's), called once the calls are read, so that each connection a
# call came on is open by then (a worker opens its connections as it
# needs them); since => a SLOWLOG id (only later calls count).
sub synced {
    my ($self, $want, %o) = @_;
    my @calls = $self->sync_calls;
    my $nodes = $o{nodes} ? $o{nodes}->() : [];
    my %node_of;
    for my $i (0 .. $#$nodes) {
        $node_of{$_} = $i for @{ $nodes->[$i] };
    }
    my (%sent, %last);
    for my $call (@calls) {
        next if defined $o{since} && $call->{id} <= $o{since};
        for my $key (grep { exists $want->{$_} } keys %{ $call->{units} }) {
            my $units = $call->{units}{$key};
            $sent{$key} += $units;
            my $node = $o{nodes} ? $node_of{ $call->{port} } // 'gone' : 0;
            $last{$key}{$node} = $units;
        }
    }
    return !grep {
        ($sent{$_} // -1) != $want->{$_} || grep { $_ } values %{ $last{$_} }
    } keys %$want;
}

# The id of the newest SLOWLOG entry: later calls have higher ones.
sub slowlog_mark {
    my ($self) = @_;
    my $newest = $self->cmd('SLOWLOG', 'GET', 1);
    return ref $newest eq 'ARRAY' && @$newest ? $newest->[0][0] : -1;
}

# How much later than a window of $W us ends a script's TTL for it may end:
# PEXPIRE rounds up to a ms, Redis's ms clock lags TIME's us, and a Redis
# the machine keeps off the CPU between reading its clock and setting the
# TTL sets it later by that long. A quarter window, at most 1 s: that, and
# still this window's end, not the next one's.
sub ttl_slack_ms {
    my ($W) = @_;
    return ($W / 4 < 1e6 ? $W / 4 : 1e6) / 1000;
}

# CRC16 as Redis Cluster computes it (XMODEM: polynomial 0x1021, initial
# value 0), bit by bit.
sub crc16 {
    my ($bytes) = @_;
    my $crc = 0;
    for my $byte (unpack 'C*', $bytes) {
        $crc ^= $byte << 8;
        $crc = ($crc & 0x8000 ? ($crc << 1) ^ 0x1021 : $crc << 1) & 0xffff
            for 1 .. 8;
    }
    return $crc;
}

# The name of an async zone's key in Redis, as the module writes it
# (format_redis_key() with HashTag::shard, src/throttle/redis.hpp):
# "<prefix>{<zone>:<shard>}:<key>", the shard being the CRC16 of the key as
# the zone stores it (its SHA-256 past 255 bytes) modulo 16; the key as it
# is if plain, else "~" and its hex, or "#" and its digest's hex if long.
# t/unit/redis_test.cpp pins names the module writes: this must agree.
sub async_key {
    my ($prefix, $zone, $key) = @_;
    my $long = length($key) > 255;
    my $stored = $long ? sha256($key) : $key;
    my $part = $long ? '#' . unpack('H*', $stored)
             : $key =~ m{^[A-Za-z0-9\-_.:@/=+]+$} ? $key
             : '~' . unpack('H*', $key);
    return "$prefix\{$zone:" . crc16($stored) % 16 . "}:$part";
}

# Keys matching a pattern (SCAN, db $db or the current one), sorted.
sub keys_matching {
    my ($self, $pattern, $db) = @_;
    my @out;
    if ($self->{tls}) {
        my $o = $self->_cli(defined $db ? ('-n', $db) : (),
                            '--scan', '--pattern', $pattern);
        return sort grep { length } split /\n/, $o;
    }
    my $c = RedisServer::Client->new(port => $self->{port},
                                     user => $ADMIN_USER, pass => $ADMIN_PASS);
    $c->cmd('SELECT', $db) if defined $db;
    my $cursor = 0;
    do {
        my $r = $c->cmd('SCAN', $cursor, 'MATCH', $pattern, 'COUNT', 1000);
        die "SCAN: $r" unless ref $r eq 'ARRAY';
        $cursor = $r->[0];
        push @out, @{ $r->[1] };
    } while ($cursor ne '0');
    $c->close;
    my %seen;
    return sort grep { !$seen{$_}++ } @out;
}

=head1 TLS FIXTURES

C<tls_fixtures($dir)> makes, with openssl, in C<$dir> (created): a CA
(C<ca>, C<ca_key>), a server certificate (C<cert>, C<key>) for CN
C<localhost> with subjectAltName DNS:localhost and IP:127.0.0.1 signed by
that CA (for serverAuth and clientAuth: cluster nodes present it to
one another on the TLS cluster bus), and an unrelated CA (C<other_ca>).
Returns a hash ref of the paths (and C<dir>). EC P-256 keys: quick to
make.

=cut

# The text of a Lua script as the module sends it (see
# cmake/embed_scripts.cmake): src/scripts/lib/prelude.lua, a newline, then
# src/scripts/NAME.lua.
sub script_source {
    my ($name) = @_;
    my $dir = dirname(__FILE__) . '/../../src/scripts';
    my $text = '';
    for my $path ("$dir/lib/prelude.lua", "$dir/$name.lua") {
        open my $fh, '<', $path or die "$path: $!";
        local $/;
        $text .= ($text eq '' ? '' : "\n") . <$fh>;
    }
    return $text;
}

# The SHA1 of script_source($name): what EVALSHA names it by.
sub script_sha { sha1_hex(script_source($_[0])) }

sub tls_fixtures {
    my ($dir) = @_;
    mkdir $dir unless -d $dir;
    my %f = (
        dir      => $dir,
        ca       => "$dir/ca.pem",
        ca_key   => "$dir/ca.key",
        cert     => "$dir/server.pem",
        key      => "$dir/server.key",
        other_ca => "$dir/other-ca.pem",
    );
    my @key = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
               '-nodes');
    open my $fh, '>', "$dir/server.ext" or die $!;
    print $fh "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
            . "basicConstraints=CA:FALSE\n"
            . "keyUsage=digitalSignature,keyEncipherment\n"
            . "extendedKeyUsage=serverAuth,clientAuth\n";
    close $fh;
    my @steps = (
        ['openssl', 'req', '-x509', @key, '-keyout', $f{ca_key},
         '-out', $f{ca}, '-days', 2, '-subj', '/CN=Throttle Test CA'],
        ['openssl', 'req', @key, '-keyout', $f{key},
         '-out', "$dir/server.csr", '-subj', '/CN=localhost'],
        ['openssl', 'x509', '-req', '-in', "$dir/server.csr",
         '-CA', $f{ca}, '-CAkey', $f{ca_key}, '-CAcreateserial',
         '-out', $f{cert}, '-days', 2, '-extfile', "$dir/server.ext"],
        ['openssl', 'req', '-x509', @key, '-keyout', "$dir/other-ca.key",
         '-out', $f{other_ca}, '-days', 2,
         '-subj', '/CN=Unrelated Test CA'],
    );
    for my $s (@steps) {
        my ($rc, $out) = run_cmd($s);
        die "@$s failed ($rc):\n$out" if $rc != 0;
    }
    chmod 0644, $f{key}, $f{ca}, $f{cert}, $f{other_ca};
    return \%f;
}

1;
