# SPDX-License-Identifier: BSD-2-Clause
package SlowBackend;

# A slow HTTP upstream for the concurrent= tests (t/concurrent.t,
# t/redis_concurrent.t): it answers when a test says so, and counts, per
# key, the requests it holds, so that a test sees what nginx let through
# at once. One process (a child of the test), one select loop: it holds
# any number of connections at once and answers the others meanwhile.
#
#     my $b = SlowBackend->start;
#     $b->port;
#
# What it answers (key, ms, hold and fail are query parameters):
#
#     GET /any?key=K&ms=N       "ok K" (200) after N ms (default 0); K's
#                               request is in flight meanwhile
#     ...&hold=1                answered when released (below), or after
#                               ms= if given (a cap); without ms=, after
#                               60 s at the latest
#     ...&fail=1                after N ms, the connection is closed
#                               without an answer (nginx: 502)
#     GET /stats?key=K          at once: "current=C max=M total=T
#                               ports=P,P..." (K's requests in flight
#                               now, the most ever at once, how many
#                               came; the client ports of those in
#                               flight: nginx's ends of them)
#     GET /release?key=K[&n=N]  answers K's held requests now (the N
#                               oldest, or all): "released=R"
#
# A request without key= counts under the key "". A request whose
# connection nginx closes before the answer (its client went away, a
# proxy timeout) is no longer in flight from that moment.
#
# From the test:
#
#     $b->stats('K')            { current, max, total, ports => [...] }
#     $b->release('K', $n)      how many were released
#     $b->wait_current('K', 3)  polls until K has 3 in flight; true if it
#                               did within $Processes::TIMEOUT
#     $b->stop                  SIGKILL (also at the test's end)

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time);
use Processes qw($TIMEOUT wait_until fork_child kill_wait);

my $HOLD_CAP = 60;    # seconds a held request waits at most

sub start {
    my ($class) = @_;
    my $listen = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1',
        LocalPort => 0,
        Proto     => 'tcp',
        Listen    => 1024,
        ReuseAddr => 1,
    ) or die "slow backend: cannot listen: $!";
    my $port = $listen->sockport;
    my $pid = fork_child(sub {
        # the test's handlers exit through its END blocks, which would
        # kill the test's other children from here
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
        $SIG{PIPE} = 'IGNORE';
        eval { _serve($listen) };
        POSIX::_exit(1);
    });
    close $listen;
    my $self = bless { pid => $pid, port => $port }, $class;
    die "slow backend on port $port does not answer\n"
        unless wait_until($TIMEOUT, sub { eval { $self->stats(''); 1 } });
    return $self;
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

# ---------------------------------------------------------------------------
# The test's side

# GET $path_query from the backend: the body; dies if there is none.
sub _get {
    my ($self, $what) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $self->{port},
                                  Proto => 'tcp', Timeout => $TIMEOUT)
        or die "slow backend: connect: $!\n";
    syswrite $s, "GET $what HTTP/1.0\r\nHost: backend\r\n\r\n";
    my $sel = IO::Select->new($s);
    my $buf = '';
    my $deadline = time + $TIMEOUT;
    while (1) {
        my $left = $deadline - time;
        die "slow backend: no answer to $what\n"
            unless $left > 0 && $sel->can_read($left);
        my $r = sysread $s, $buf, 65536, length $buf;
        last unless $r;
    }
    close $s;
    my ($body) = $buf =~ /^HTTP\/1\.1 200 [^\r]*\r\n.*?\r\n\r\n(.*)\z/s
        or die "slow backend: bad answer to $what: $buf\n";
    return $body;
}

sub stats {
    my ($self, $key) = @_;
    my $body = $self->_get('/stats?key=' . _escape($key));
    my %s = $body =~ /(\w+)=(\S*)/g;
    $s{ports} = [grep { length } split /,/, $s{ports} // ''];
    return \%s;
}

sub release {
    my ($self, $key, $n) = @_;
    my $body = $self->_get('/release?key=' . _escape($key)
                           . (defined $n ? "&n=$n" : ''));
    return $body =~ /released=(\d+)/ ? $1 : 0;
}

sub wait_current {
    my ($self, $key, $n, $seconds) = @_;
    return wait_until($seconds // $TIMEOUT,
                      sub { $self->stats($key)->{current} == $n }, 0.02);
}

sub _escape {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf '%%%02X', ord $1/ge;
    return $s;
}

sub _unescape {
    my ($s) = @_;
    $s =~ tr/+/ /;
    $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    return $s;
}

# ---------------------------------------------------------------------------
# The child

sub _serve {
    my ($listen) = @_;
    $listen->blocking(0);
    my $sel = IO::Select->new($listen);
    my %conn;                       # fileno => connection
    my (%current, %max, %total);    # per key
    my $seq = 0;

    my $drop = sub {    # closes a connection; a request in flight ends
        my ($c) = @_;
        $current{ $c->{key} }-- if $c->{state} eq 'waiting';
        $c->{state} = 'done';
        $sel->remove($c->{sock});
        delete $conn{ $c->{fd} };
        close $c->{sock};
    };
    my $answer = sub {
        my ($c, $body) = @_;
        my $msg = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                . 'Content-Length: ' . length($body) . "\r\n"
                . "Connection: close\r\n\r\n$body";
        $c->{sock}->blocking(1);
        syswrite $c->{sock}, $msg;
        $drop->($c);
    };

    while (1) {
        my $now = time;
        my $wait = 1;
        for my $c (values %conn) {
            next unless $c->{state} eq 'waiting';
            my $left = $c->{due} - $now;
            $wait = $left if $left < $wait;
        }
        $wait = 0 if $wait < 0;

        for my $s ($sel->can_read($wait)) {
            if ($s == $listen) {
                while (my $n = $listen->accept) {
                    $n->blocking(0);
                    my $fd = fileno $n;
                    $conn{$fd} = { sock => $n, fd => $fd, buf => '',
                                   state => 'reading', key => '' };
                    $sel->add($n);
                }
                next;
            }
            my $c = $conn{ fileno $s } or next;
            my $r = sysread $s, $c->{buf}, 65536, length $c->{buf};
            next if !defined $r && $!{EAGAIN};
            if (!$r) {    # EOF or error: nginx is gone
                $drop->($c);
                next;
            }
            next unless $c->{state} eq 'reading'
                     && $c->{buf} =~ /\r?\n\r?\n/;
            my ($target) = $c->{buf} =~ /\A\S+ (\S+)/;
            my ($path, $query) = split /\?/, $target // '/', 2;
            my %q;
            for my $pair (split /&/, $query // '') {
                my ($k, $v) = split /=/, $pair, 2;
                $q{ _unescape($k) } = _unescape($v // '');
            }
            my $key = $q{key} // '';
            if ($path eq '/stats') {
                my @ports = map { $_->{port} }
                            sort { $a->{seq} <=> $b->{seq} }
                            grep { $_->{state} eq 'waiting' && $_->{key} eq $key }
                            values %conn;
                $answer->($c, sprintf "current=%d max=%d total=%d ports=%s\n",
                          $current{$key} // 0, $max{$key} // 0,
                          $total{$key} // 0, join ',', @ports);
                next;
            }
            if ($path eq '/release') {
                my @held = sort { $a->{seq} <=> $b->{seq} }
                           grep { $_->{state} eq 'waiting' && $_->{hold}
                                  && $_->{key} eq $key } values %conn;
                splice @held, $q{n} if defined $q{n} && $q{n} < @held;
                $_->{due} = 0 for @held;
                $answer->($c, 'released=' . scalar(@held) . "\n");
                next;
            }
            my $ms = $q{ms};
            $c->{key}  = $key;
            $c->{fail} = $q{fail};
            $c->{hold} = $q{hold};
            $c->{seq}  = $seq++;
            $c->{port} = $s->peerport;
            $c->{due}  = time + (defined $ms ? $ms / 1000
                               : $c->{hold} ? $HOLD_CAP : 0);
            $c->{state} = 'waiting';
            $total{$key}++;
            $current{$key}++;
            $max{$key} = $current{$key}
                if $current{$key} > ($max{$key} // 0);
        }

        $now = time;
        for my $c (sort { $a->{seq} <=> $b->{seq} }
                   grep { $_->{state} eq 'waiting' && $_->{due} <= $now }
                   values %conn) {
            if ($c->{fail}) {
                $drop->($c);
            } else {
                $answer->($c, "ok $c->{key}\n");
            }
        }
    }
}

1;
