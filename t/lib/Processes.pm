# SPDX-License-Identifier: BSD-2-Clause
package Processes;

# Processes, ports and files for the test harness, shared by ThrottleTest's
# modules (nginx) and RedisServer (redis-server and fakes): one bound on
# every wait, polling, free ports, commands run with a time limit, children
# killed at exit, and /proc for processes that are not our children (a
# daemonised nginx) and for sockets (what a server has read, whose
# connection is whose).

use strict;
use warnings;

use Exporter 'import';
use File::Temp;
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

our @EXPORT_OK = qw($TIMEOUT wait_until free_port read_file fork_child
                    exited kill_wait run_cmd alive children_of wait_gone
                    waits_for_signals
                    local_ports_of local_ports_by all_read open_connections
                    closed_by_peer others_listen);

our $TIMEOUT = $ENV{TEST_THROTTLE_TIMEOUT} || 5;    # seconds, every wait

my %children;    # pid => 1: children still running, killed at exit

# Calls $cond every $interval seconds (default 0.02) until it returns true
# or $seconds have passed; returns its last result. The last call starts
# after $seconds: a condition that reads /proc/net/tcp can take a second or
# two on a busy machine, and one call that began before what it waits for
# happened must not be the only one.
sub wait_until {
    my ($seconds, $cond, $interval) = @_;
    my $deadline = time + $seconds;
    while (1) {
        my $last = time > $deadline;
        my $r = $cond->();
        return $r if $r || $last;
        sleep($interval // 0.02);
    }
}

# A loopback port nothing listens on right now.
sub free_port {
    my $s = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1',
        LocalPort => 0,
        Proto     => 'tcp',
        Listen    => 1,
        ReuseAddr => 1,
    ) or die "cannot bind 127.0.0.1:0: $!";
    my $port = $s->sockport;
    close $s;
    return $port;
}

# A file's text; '' when it cannot be read (a log not written yet).
sub read_file {
    my ($path) = @_;
    open my $fh, '<', $path or return '';
    local $/;
    my $t = <$fh> // '';
    close $fh;
    return $t;
}

# ---------------------------------------------------------------------------
# Our children

# Forks a child that runs $code (which execs, or never returns) with stdin
# from /dev/null; returns its pid. The END block kills it if it still runs.
sub fork_child {
    my ($code) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        $code->();
        POSIX::_exit(127);    # exec failed
    }
    $children{$pid} = 1;
    return $pid;
}

# Whether a child of fork_child has exited; when this call reaped it, its
# wait status is in $?.
sub exited {
    my ($pid) = @_;
    return 1 unless $children{$pid};
    my $r = waitpid $pid, WNOHANG;
    return 0 unless $r == $pid || $r == -1;
    delete $children{$pid};
    return 1;
}

# Sends $signal to a child of fork_child and waits $TIMEOUT for it to exit,
# then SIGKILL.
sub kill_wait {
    my ($pid, $signal) = @_;
    return unless $pid && $children{$pid};
    kill 'CONT', $pid;    # a stopped process cannot act on TERM
    kill $signal, $pid;
    return if wait_until($TIMEOUT, sub { exited($pid) }, 0.01);
    kill 'KILL', $pid;
    waitpid $pid, 0;
    delete $children{$pid};
}

END {
    my $status = $?;
    for my $pid (keys %children) {
        kill 'CONT', $pid;
        kill 'KILL', $pid;
        waitpid $pid, 0;
    }
    $? = $status;
}

# Runs a command (array ref), killed after $timeout seconds (default twice
# $TIMEOUT); returns (exit code or -1 if it timed out, stdout+stderr).
sub run_cmd {
    my ($cmd, $timeout) = @_;
    my $out = File::Temp->new(TMPDIR => 1);
    my $pid = fork_child(sub {
        open STDOUT, '>', $out->filename;
        open STDERR, '>&', \*STDOUT;
        exec @$cmd;
    });
    my $status = -1;
    if (wait_until($timeout // $TIMEOUT * 2, sub { exited($pid) }, 0.005)) {
        $status = $? >> 8;
    } else {
        kill_wait($pid, 'KILL');
    }
    my $text = read_file($out->filename);
    $text .= "\n(command timed out)\n" if $status == -1;
    return ($status, $text);
}

# ---------------------------------------------------------------------------
# Any process, through /proc

# (state letter, parent pid) of a process, or () if there is none.
sub proc_stat {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return ();
    my $stat = <$fh> // '';
    close $fh;
    return $stat =~ /\)\s+(\S)\s+(\d+)/;
}

# A process counts as gone when it no longer exists or is a zombie (nobody
# may reap a daemonised master in a container).
sub alive {
    my ($pid) = @_;
    my ($state) = proc_stat($pid);
    return defined $state && $state ne 'Z' && $state ne 'X';
}

# The pids whose parent is $ppid (zombies left out), in order.
sub children_of {
    my ($ppid) = @_;
    my @kids;
    opendir my $dh, '/proc' or return ();
    for my $pid (grep { /^\d+$/ } readdir $dh) {
        my ($state, $parent) = proc_stat($pid) or next;
        push @kids, $pid + 0 if $parent == $ppid && $state ne 'Z';
    }
    closedir $dh;
    return sort { $a <=> $b } @kids;
}

# Whether a process sleeps in sigsuspend(): nginx's master between two
# signals, done with the last one (its kernel wait channel).
sub waits_for_signals {
    my ($pid) = @_;
    return read_file("/proc/$pid/wchan") =~ /sigsuspend/;
}

# Waits up to $timeout seconds for every pid to be gone; true if they are.
sub wait_gone {
    my ($timeout, @pids) = @_;
    return wait_until($timeout, sub { !grep { alive($_) } @pids });
}

# ---------------------------------------------------------------------------
# TCP sockets, through /proc/net/tcp: what a server has read and closed,
# what a client has noticed, whose connection is whose

my $LISTEN = '0A';
my $TIME_WAIT = '06';
my $CLOSE_WAIT = '08';

# The IPv4 TCP sockets of this network namespace: { local_port,
# remote_port, state (as /proc writes it: '0A' listening), rx_queue (bytes
# not read yet; for a listening socket, connections not accepted yet),
# inode (0 for a connection not accepted yet) }. Only the lines that
# match $only (a regex, port_re() or inode_re()) are parsed: a busy
# machine's tests leave tens of thousands of sockets in TIME_WAIT, and
# parsing them all takes about as long as reading the file.
sub tcp_sockets {
    my ($only) = @_;
    my @socks;
    for my $line (grep { /$only/ } split /\n/, read_file('/proc/net/tcp')) {
        my ($local, $remote, $state, $queues, $inode) =
            (split ' ', $line)[1, 2, 3, 4, 9];
        next unless $local && $local =~ /^[0-9A-F]+:([0-9A-F]+)$/;
        my $port = hex $1;
        my ($remote_port) = $remote =~ /:([0-9A-F]+)$/;
        my ($rx) = $queues =~ /:([0-9A-F]+)$/;
        push @socks, { local_port => $port, remote_port => hex $remote_port,
                       state => $state, rx_queue => hex $rx,
                       inode => $inode };
    }
    return @socks;
}

# The lines of a socket with $port at either end (more may match).
sub port_re {
    my ($port) = @_;
    my $hex = sprintf '%04X', $port;
    return qr/:$hex /;
}

# The lines of the sockets with these inodes (more may match).
sub inode_re {
    my (@inodes) = @_;
    my $any = join '|', @inodes;
    return qr/ (?:$any) /;
}

# The inodes of the sockets the processes hold open.
sub socket_inodes {
    my (@pids) = @_;
    my %inodes;
    for my $pid (@pids) {
        opendir my $dh, "/proc/$pid/fd" or next;
        for my $fd (readdir $dh) {
            my $link = readlink "/proc/$pid/fd/$fd" // next;
            $inodes{$1} = 1 if $link =~ /^socket:\[(\d+)\]$/;
        }
        closedir $dh;
    }
    return \%inodes;
}

# The local ports of the TCP sockets the processes hold (which connections
# are theirs).
sub local_ports_of {
    my (@pids) = @_;
    my ($ports) = local_ports_by([@pids]);
    return @$ports;
}

# local_ports_of() for each group of processes (a list of pids), from one
# read of /proc/net/tcp, which takes up to a second on a busy machine: an
# array of ports per group, in order.
sub local_ports_by {
    my (@groups) = @_;
    my %group_of;
    for my $i (0 .. $#groups) {
        $group_of{$_} = $i for keys %{ socket_inodes(@{ $groups[$i] }) };
    }
    my @ports = map { [] } @groups;
    return @ports unless %group_of;
    for my $s (tcp_sockets(inode_re(keys %group_of))) {
        my $i = $group_of{ $s->{inode} } // next;
        push @{ $ports[$i] }, $s->{local_port};
    }
    return @ports;
}

# Whether the server listening on $port has read everything sent to it: no
# connection waits to be accepted, none has bytes it did not read.
sub all_read {
    my ($port) = @_;
    return !grep { $_->{local_port} == $port && $_->{rx_queue} }
                 tcp_sockets(port_re($port));
}

# How many connections the server on $port has not closed yet (its ends of
# them; TIME_WAIT ones are closed).
sub open_connections {
    my ($port) = @_;
    return scalar grep {
        $_->{local_port} == $port && $_->{state} ne $LISTEN
            && $_->{state} ne $TIME_WAIT
    } tcp_sockets(port_re($port));
}

# Whether a process other than @pids listens on $port too (SO_REUSEPORT
# lets processes of one user share a port).
sub others_listen {
    my ($port, @pids) = @_;
    my $ours = socket_inodes(@pids);
    return scalar grep {
        $_->{local_port} == $port && $_->{state} eq $LISTEN
            && !$ours->{ $_->{inode} }
    } tcp_sockets(port_re($port));
}

# How many connections to the server on $port it closed and the client
# has not closed yet (a client that has not noticed).
sub closed_by_peer {
    my ($port) = @_;
    return scalar grep { $_->{remote_port} == $port && $_->{state} eq $CLOSE_WAIT }
                      tcp_sockets(port_re($port));
}

1;
