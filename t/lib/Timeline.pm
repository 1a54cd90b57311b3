package Timeline;

# A timeline of requests: each sent at its own offset on a connection of
# its own, opened beforehand, and each response's status, headers and the
# time it took. What delay= does shows in when the responses come back, so
# one process watches every connection at once (select), and a request
# waiting on the server never holds the next one back.
#
#     my @res = Timeline::fire($port, [
#         { at => 0,    uri => '/t/a.txt', headers => ['X-Key' => 'k'] },
#         { at => 0.35, uri => '/t/a.txt', headers => ['X-Key' => 'k'] },
#         { at => 0.5,  run => sub { ... } },     # code, at its offset
#     ]);
#
# returns a response per request, in the order given: the request's own
# fields plus { status, headers => { lc name => value }, sent (seconds
# from the start), took (sent to the last byte), error }. Every response
# must come within $Processes::TIMEOUT after the last offset.
#
# To hold two limiters to the same timeline (throttle and limit_req, a
# strict zone and a local one), groups() sends each group of requests to
# every location at once, and same_outcomes() compares two locations group
# by group: the order in which a group's requests reach nginx is the
# kernel's, so each group's responses are compared sorted by time taken.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use List::Util qw(max);
use Test::More ();
use Time::HiRes qw(time sleep);
use Processes qw($TIMEOUT);

# Leeway between the connections being open and the first offset: nginx
# accepts them meanwhile.
my $LEAD = 0.1;

sub fire {
    my ($port, $steps) = @_;
    my @requests = grep { $_->{uri} } @$steps;
    my %conn;    # fileno => the request's state
    my @due;     # what is yet to happen, by offset

    for my $step (@$steps) {
        my $state = { step => $step };
        if ($step->{uri}) {
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                PeerPort => $port, Proto => 'tcp', Timeout => $TIMEOUT)
                or die "Timeline: connect to $port: $!\n";
            $s->blocking(0);
            @$state{qw(sock buf)} = ($s, '');
            $conn{ fileno $s } = $state;
        }
        push @due, $state;
    }
    @due = sort { $a->{step}{at} <=> $b->{step}{at} } @due;

    my $sel = IO::Select->new;
    my $start = time + $LEAD;
    my $deadline = $start + max(map { $_->{step}{at} } @due) + $TIMEOUT;
    my $open = @requests;

    while ($open && time < $deadline) {
        while (@due && $start + $due[0]{step}{at} <= time) {
            my $state = shift @due;
            if ($state->{sock}) {
                send_request($state, time - $start);
                $sel->add($state->{sock});
            } else {
                $state->{step}{run}->();
            }
        }
        my $next = @due ? $start + $due[0]{step}{at} : $deadline;
        my $wait = $next - time;
        for my $s ($sel->can_read($wait > 0 ? $wait : 0)) {
            my $state = $conn{ fileno $s };
            next if read_some($state, time - $start);
            $sel->remove($s);
            close $s;
            $open--;
        }
    }

    my %by_step = map { ($_->{step} => $_) } values %conn;
    return map { response($by_step{$_}) } @requests;
}

# The steps that send, for each [offset, count] of $groups, count requests
# to each of $locations (/LOCATION/a.txt) at that offset, with @headers;
# each is marked with its group's index and its location.
sub groups {
    my ($groups, $locations, @headers) = @_;
    my @steps;
    for my $g (0 .. $#$groups) {
        my ($at, $count) = @{ $groups->[$g] };
        for (1 .. $count) {
            push @steps, map {
                { at => $at, uri => "/$_/a.txt", headers => [@headers],
                  group => $g, loc => $_ }
            } @$locations;
        }
    }
    return @steps;
}

# One location's responses to one group, quickest first.
sub outcome {
    my ($responses, $group, $loc) = @_;
    return sort { ($a->{took} // 1e9) <=> ($b->{took} // 1e9) }
           grep { $_->{group} == $group && $_->{loc} eq $loc } @$responses;
}

# A test per group: locations $a and $b gave the same statuses, and times
# within $tolerance seconds of each other, quickest with quickest.
sub same_outcomes {
    my ($name, $responses, $first, $second, $tolerance) = @_;
    my $last = max(map { $_->{group} } @$responses);
    for my $g (0 .. $last) {
        my @x = outcome($responses, $g, $first);
        my @y = outcome($responses, $g, $second);
        my $show = sub {
            join ' ', map { ($_->{status} // $_->{error}) . '/'
                            . int(1000 * ($_->{took} // -1)) . 'ms' } @_;
        };
        my @far = grep {
            !defined $x[$_]{took} || !defined $y[$_]{took}
                || abs($x[$_]{took} - $y[$_]{took}) > $tolerance
        } 0 .. $#x;
        Test::More::ok(
            "@{[ sort map { $_->{status} // 'none' } @x ]}"
                eq "@{[ sort map { $_->{status} // 'none' } @y ]}" && !@far,
            "$name: group $g: $second as $first, within "
                . int($tolerance * 1000) . ' ms')
            or Test::More::diag("$first: " . $show->(@x)
                                . "\n$second: " . $show->(@y));
    }
}

sub send_request {
    my ($state, $now) = @_;
    my $req = $state->{step};
    my $msg = "GET $req->{uri} HTTP/1.1\r\nHost: localhost\r\n"
            . "Connection: close\r\n";
    my @h = @{ $req->{headers} || [] };
    $msg .= sprintf "%s: %s\r\n", splice @h, 0, 2 while @h;
    $msg .= "\r\n";
    # a few hundred bytes into an empty socket buffer: written at once
    my $w = syswrite $state->{sock}, $msg;
    $state->{error} = "write: $!" unless defined $w && $w == length $msg;
    $state->{sent} = $now;
}

# Reads what came; false once the server has closed the connection (the
# response is whole) or it failed.
sub read_some {
    my ($state, $now) = @_;
    my $r = sysread $state->{sock}, $state->{buf}, 65536, length $state->{buf};
    return 1 if !defined $r && $!{EAGAIN};
    $state->{error} = "read: $!" unless defined $r;
    $state->{took} = $now - $state->{sent};
    return 0;
}

sub response {
    my ($state) = @_;
    my %res = (%{ $state->{step} }, sent => $state->{sent},
               took => $state->{took}, headers => {});
    $res{error} = $state->{error} // (defined $state->{took}
                                      ? undef : 'no response in time');
    my ($head) = split /\r\n\r\n/, $state->{buf}, 2;
    my ($status_line, @lines) = split /\r\n/, $head // '';
    if (($status_line // '') =~ m{^HTTP/1\.[01] (\d{3})}) {
        $res{status} = $1;
    } else {
        $res{error} //= 'no status line';
    }
    for my $l (@lines) {
        $res{headers}{ lc $1 } = $2 if $l =~ /^([^:]+):\s*(.*?)\s*$/;
    }
    return \%res;
}

1;
