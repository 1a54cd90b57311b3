# SPDX-License-Identifier: BSD-2-Clause
package RedisServer::Fake;

# A TCP server for faults a real Redis cannot produce. Modes:
#   garbage  answers every read with bytes that are not RESP
#   silent   accepts connections, reads, never answers
#   ok       answers "+OK" to every command (AUTH, SELECT... and the
#            scripts: a well-formed reply that is not the script's)
#   short    "+OK" to every command but EVALSHA / EVAL, answered with a
#            2-element array of integers (the script's reply has 5)
#   huge     "+OK" to every command but EVALSHA / EVAL, answered with
#            the first line of an array of 2000000000 elements
# Runs in a child process; stop() kills it, or Processes' END block.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use Processes qw(fork_child kill_wait);

sub start {
    my ($class, $mode) = @_;
    die "unknown fake mode $mode"
        unless $mode =~ /^(garbage|silent|ok|short|huge)$/;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1',
        LocalPort => 0,
        Proto     => 'tcp',
        Listen    => 64,
        ReuseAddr => 1,
    ) or die "fake redis: cannot listen: $!";
    my $port = $listen->sockport;

    my $pid = fork_child(sub { _serve($listen, $mode) });
    close $listen;
    return bless { pid => $pid, port => $port, mode => $mode }, $class;
}

# The child: answers every connection as the mode says, until killed.
sub _serve {
    my ($listen, $mode) = @_;
    $SIG{PIPE} = 'IGNORE';
    my $sel = IO::Select->new($listen);
    my %buf;
    while (1) {
        for my $fh ($sel->can_read(1)) {
            if ($fh == $listen) {
                my $c = $listen->accept or next;
                $sel->add($c);
                $buf{$c} = '';
                next;
            }
            my $r = sysread $fh, $buf{$fh}, 65536, length $buf{$fh};
            if (!$r) {
                $sel->remove($fh);
                delete $buf{$fh};
                close $fh;
                next;
            }
            if ($mode eq 'garbage') {
                syswrite $fh, "\x01\x02 this is not RESP }{\r\n";
                $buf{$fh} = '';
            } elsif ($mode ne 'silent') {
                while (defined(my $cmd = _take_command(\$buf{$fh}))) {
                    my $reply = "+OK\r\n";
                    my %script_reply = (short => "*2\r\n:0\r\n:1\r\n",
                                        huge  => "*2000000000\r\n");
                    $reply = $script_reply{$mode}
                        if $script_reply{$mode} && $cmd =~ /^(EVALSHA|EVAL)$/i;
                    syswrite $fh, $reply;
                }
            }
        }
    }
}

# Removes one complete RESP command (an array of bulk strings) from the
# buffer; returns its name, or undef if the buffer holds no whole command.
sub _take_command {
    my ($buf) = @_;
    my $pos = 0;
    return undef unless $$buf =~ /\A\*(\d+)\r\n/;
    my $n = $1;
    $pos = length "*$n\r\n";
    my $name;
    for (1 .. $n) {
        my $rest = substr $$buf, $pos;
        return undef unless $rest =~ /\A\$(\d+)\r\n/;
        my $len = $1;
        my $start = $pos + length("\$$len\r\n");
        return undef if length($$buf) < $start + $len + 2;
        $name //= substr $$buf, $start, $len;
        $pos = $start + $len + 2;
    }
    substr($$buf, 0, $pos) = '';
    return $name // '';
}

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }

sub stop {
    my ($self) = @_;
    kill_wait(delete $self->{pid}, 'KILL') if $self->{pid};
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop if $self->{pid};
}

# ===========================================================================

package RedisServer::Closed;

# A loopback port where nothing listens (connections are refused). A
# socket bound to it, that never listens, keeps other processes from
# taking the port while the test uses it.

use IO::Socket::INET;

sub new {
    my ($class) = @_;
    my $sock = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1',
        LocalPort => 0,
        Proto     => 'tcp',
    ) or die "closed port: cannot bind: $!";
    return bless { sock => $sock, port => $sock->sockport }, $class;
}

sub port { $_[0]{port} }

sub stop {
    my ($self) = @_;
    close delete $self->{sock} if $self->{sock};
}

1;
