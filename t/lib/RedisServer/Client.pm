# SPDX-License-Identifier: BSD-2-Clause
package RedisServer::Client;

# A minimal RESP2 client for the tests (RedisServer's cmd, and the .t files
# that talk to Redis themselves); every read and write bounded by a timeout.
# Error replies are RedisServer::Error objects, defined below.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use Processes qw($TIMEOUT);
use Time::HiRes qw(time);

sub new {
    my ($class, %o) = @_;
    my $timeout = $o{timeout} || $TIMEOUT;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1',
        PeerPort => $o{port},
        Proto    => 'tcp',
        Timeout  => $timeout,
    ) or die "connect to 127.0.0.1:$o{port}: $!\n";
    $sock->autoflush(1);
    my $self = bless { sock => $sock, buf => '', timeout => $timeout }, $class;
    if (defined $o{pass}) {
        my $r = $self->cmd('AUTH', defined $o{user} ? $o{user} : (), $o{pass});
        die "AUTH: $r\n" if ref $r && $r->isa('RedisServer::Error');
    }
    return $self;
}

sub close {
    my ($self) = @_;
    close $self->{sock} if $self->{sock};
    delete $self->{sock};
}

sub encode {
    my (@args) = @_;
    my $m = '*' . @args . "\r\n";
    $m .= '$' . length($_) . "\r\n$_\r\n" for map { "$_" } @args;
    return $m;
}

sub cmd {
    my ($self, @args) = @_;
    $self->send_raw(encode(@args));
    return $self->read_reply;
}

sub send_raw {
    my ($self, $msg) = @_;
    my $sock = $self->{sock} or die "not connected\n";
    my $sel = IO::Select->new($sock);
    my $deadline = time + $self->{timeout};
    my $off = 0;
    while ($off < length $msg) {
        my $left = $deadline - time;
        die "timeout writing to redis\n"
            unless $left > 0 && $sel->can_write($left);
        my $w = syswrite $sock, $msg, length($msg) - $off, $off;
        die "write to redis: $!\n" unless defined $w;
        $off += $w;
    }
}

sub _fill {
    my ($self, $deadline) = @_;
    my $sel = IO::Select->new($self->{sock});
    my $left = $deadline - time;
    die "timeout ($self->{timeout}s) reading a redis reply\n"
        unless $left > 0 && $sel->can_read($left);
    my $r = sysread $self->{sock}, $self->{buf}, 65536, length $self->{buf};
    die "read from redis: $!\n" unless defined $r;
    die "redis closed the connection\n" if $r == 0;
}

sub _line {
    my ($self, $deadline) = @_;
    while ((my $i = index $self->{buf}, "\r\n") < 0) {
        $self->_fill($deadline);
    }
    my $i = index $self->{buf}, "\r\n";
    my $line = substr $self->{buf}, 0, $i;
    substr($self->{buf}, 0, $i + 2) = '';
    return $line;
}

sub read_reply {
    my ($self, $deadline) = @_;
    $deadline //= time + $self->{timeout};
    my $line = $self->_line($deadline);
    my ($type, $rest) = (substr($line, 0, 1), substr($line, 1));
    if ($type eq '+') { return $rest }
    if ($type eq '-') { return RedisServer::Error->new($rest) }
    if ($type eq ':') { return 0 + $rest }
    if ($type eq '$') {
        return undef if $rest < 0;
        $self->_fill($deadline) while length($self->{buf}) < $rest + 2;
        my $s = substr $self->{buf}, 0, $rest;
        substr($self->{buf}, 0, $rest + 2) = '';
        return $s;
    }
    if ($type eq '*') {
        return undef if $rest < 0;
        return [ map { $self->read_reply($deadline) } 1 .. $rest ];
    }
    die "bad RESP reply line: $line\n";
}

# ===========================================================================

package RedisServer::Error;

# An error reply ("-ERR ..."): stringifies to its message.

use overload '""' => sub { $_[0]{message} }, fallback => 1;

sub new { my ($c, $m) = @_; bless { message => $m }, $c }
sub message { $_[0]{message} }

1;
