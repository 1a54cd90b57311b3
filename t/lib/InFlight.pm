# SPDX-License-Identifier: BSD-2-Clause
package InFlight;

# Requests held in flight through nginx to a SlowBackend (t/lib/
# SlowBackend.pm), for the concurrent= tests: sent and left unread while
# the backend holds them, read when the test lets them end, or many at
# once for a while. Every request has its key in X-Key (the zones' key)
# and in ?key= (the backend's); every wait is bounded by
# $Processes::TIMEOUT.
#
#     my ($sock, $res) = hold($env, $backend, 'alice', '/slow?hold=1');
#         sends GET /slow?hold=1&key=alice and waits until the backend has
#         it (admitted: ($sock, undef)) or nginx answers it (refused or
#         failed: (undef, $res)); dies if neither happens in time
#     my $sock = send_request($env, 'alice', '/slow?hold=1');
#         the request written, nothing read
#     my $res = finish($sock);
#         its response (ThrottleTest::Http's form), then the end of the
#         connection: nginx closes it (Connection: close) once the request
#         is over, log phase included, so a request sent after finish()
#         comes after this one's place was freed. {eof} says whether the
#         end came in time
#     my $res = probe($env, 'alice', '/slow?ms=0');
#         one request, read to its end (finish)
#     my $f = flood([$env1, $env2], connections => 64, seconds => 3,
#                   key => 'k', uri => '/slow?ms=50');
#         that many connections at once, spread over the nginx, each
#         sending the request again as soon as it has its answer (after
#         25 ms when it was not a 200), for that long; then every answer
#         read. { status => { status => count }, x_status => { X-Status
#         header => count }, by_node => [ { status => count } per nginx ],
#         took }; a connection that got no status counts as "error: why"

use strict;
use warnings;

use Exporter 'import';
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Processes qw($TIMEOUT wait_until);
use ThrottleTest::Http qw(connect_to http_read);

our @EXPORT_OK = qw(hold send_request finish probe flood);

# GET $uri with key=$key added to its query, X-Key: $key.
sub request_text {
    my ($key, $uri) = @_;
    $uri .= ($uri =~ /\?/ ? '&' : '?') . "key=$key";
    return "GET $uri HTTP/1.1\r\nHost: localhost\r\nX-Key: $key\r\n"
         . "Connection: close\r\n\r\n";
}

sub send_request {
    my ($env, $key, $uri) = @_;
    my $sock = connect_to($env) or die "connect to nginx: $!\n";
    my $msg = request_text($key, $uri);
    syswrite($sock, $msg) == length $msg or die "write to nginx: $!\n";
    return $sock;
}

sub hold {
    my ($env, $backend, $key, $uri) = @_;
    my $before = $backend->stats($key)->{total};
    my $sock = send_request($env, $key, $uri);
    my $sel = IO::Select->new($sock);
    my $deadline = time + $TIMEOUT;
    while (time < $deadline) {
        return (undef, finish($sock)) if $sel->can_read(0.02);
        return ($sock, undef) if $backend->stats($key)->{total} > $before;
    }
    die "GET $uri ($key): neither answered nor at the backend "
        . "after ${TIMEOUT}s\n";
}

sub finish {
    my ($sock) = @_;
    my $res = http_read($sock, { method => 'GET' });
    my $sel = IO::Select->new($sock);
    my $deadline = time + $TIMEOUT;
    while (1) {
        my $left = $deadline - time;
        last unless $left > 0 && $sel->can_read($left);
        my $r = sysread $sock, my $buf, 65536;
        if (!$r) {
            $res->{eof} = 1;
            last;
        }
    }
    close $sock;
    return $res;
}

sub probe {
    my ($env, $key, $uri) = @_;
    return finish(send_request($env, $key, $uri));
}

sub flood {
    my ($envs, %o) = @_;
    my $msg = request_text($o{key}, $o{uri});
    my $sel = IO::Select->new;
    my (%slot_of, %status, %x_status, @by_node);
    my @slots = map { { node => $_ % @$envs, next_at => 0 } }
                0 .. $o{connections} - 1;
    my $open = sub {
        my ($slot) = @_;
        my $sock = connect_to($envs->[ $slot->{node} ]);
        unless ($sock) {
            $status{"error: connect: $!"}++;
            $slot->{next_at} = time + 0.01;
            return;
        }
        syswrite $sock, $msg;
        $sock->blocking(0);
        $slot->{sock} = $sock;
        $slot->{buf} = '';
        $slot_of{ fileno $sock } = $slot;
        $sel->add($sock);
    };
    my $t0 = time;
    my $end = $t0 + $o{seconds};
    my $last = $end + 2 * $TIMEOUT;    # answers still awaited after $end
    while (1) {
        my $now = time;
        if ($now < $end) {
            $open->($_) for grep { !$_->{sock} && $_->{next_at} <= $now }
                            @slots;
        }
        last unless $sel->count || $now < $end;
        last if $now > $last;
        for my $s ($sel->can_read(0.005)) {
            my $slot = $slot_of{ fileno $s };
            my $r = sysread $s, $slot->{buf}, 65536, length $slot->{buf};
            next if !defined $r && $!{EAGAIN};
            next if $r;
            # the answer is whole: nginx closed the connection
            my ($code) = $slot->{buf} =~ m{\AHTTP/1\.[01] (\d{3})};
            $code //= 'error: ' . (defined $r ? 'no status' : "read: $!");
            $status{$code}++;
            my ($x) = $slot->{buf} =~ /\r\nX-Status: ([^\r]*)\r\n/i;
            $x_status{ $x // 'none' }++;
            $by_node[ $slot->{node} ]{$code}++;
            $sel->remove($s);
            delete $slot_of{ fileno $s };
            close $s;
            $slot->{sock} = undef;
            $slot->{next_at} = time + ($code eq '200' ? 0 : 0.025);
        }
    }
    $status{'error: no answer in time'} += $sel->count if $sel->count;
    close $_ for $sel->handles;
    return { status => \%status, x_status => \%x_status,
             by_node => [map { $by_node[$_] // {} } 0 .. $#$envs],
             took => time - $t0 };
}

1;
