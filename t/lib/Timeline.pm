# SPDX-License-Identifier: BSD-2-Clause
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
# from the start), took (from its offset to the last byte), error }. A
# burst's clock starts at its offset, where its first request is due: a
# client the machine holds back a few ms between two writes does not make
# the second one's wait look shorter. Every response must come within
# $Processes::TIMEOUT after the last offset.
#
# A run step runs in the loop that reads the responses, which reads none
# while it runs: a response that comes meanwhile is timed late by as long.
# It must be quick (a signal, not a command that starts a process).
#
# Each timed location says when nginx began reading the request and when
# it answered, on nginx's clock:
#
#     add_header X-Timing "$msec $request_time" always;
#
# (the time of the response's header, and how long before it the
# request's first bytes were read), which each response carries as
# {started, answered}, in seconds. The client's clock sees a response
# only once the client gets to read it, and writes a request only once it
# gets to: on a busy machine, a test process held back 70 to 110 ms made
# waits look that much longer. So a response's wait is held to the rule's
# on both clocks, each where it cannot be wrong: never shorter on the
# client's (a client held back only makes it look longer), never much
# longer on nginx's, from when it began reading the first request of the
# burst (what the module can be held to). Responses are ordered by when
# nginx answered them.
#
# To hold two limiters to the same timeline (throttle and limit_req, a
# strict zone and a local one), groups() sends each group of requests to
# every location at once, and same_outcomes() compares two locations group
# by group: the order in which a group's requests reach nginx is the
# kernel's, so each group's responses are compared sorted by time taken.
#
# For a burst sent at once, burst() gives its responses quickest first, and
# statuses_are(), waits_are() and header_values_are() test them against
# the rule's values, within tolerance() (40 ms, 80 under the sanitizers):
# less than the 100 ms or more of a whole T at the rates the tests use,
# more than what scheduling on a busy machine adds.

use strict;
use warnings;

use Exporter 'import';
use IO::Select;
use IO::Socket::INET;
use List::Util qw(max);
use Test::More ();
use Time::HiRes qw(time sleep);
use Processes qw($TIMEOUT);

our @EXPORT_OK = qw(fire tolerance burst statuses_are waits_are
                    header_values_are quit_while_waiting);

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

# Responses in the order nginx answered them (those it did not answer
# last).
sub by_answer {
    return sort { ($a->{answered} // 9e9) <=> ($b->{answered} // 9e9) } @_;
}

# One location's responses to one group, quickest first.
sub outcome {
    my ($responses, $group, $loc) = @_;
    return by_answer(grep { $_->{group} == $group && $_->{loc} eq $loc }
                     @$responses);
}

# A test per group: locations $a and $b gave the same statuses, and
# answered within $tolerance seconds of each other on nginx's clock,
# quickest with quickest; a request nginx read later than the other (the
# group's requests are written at once, but nginx may be held back
# between reading two of them) may be answered later by as long.
sub same_outcomes {
    my ($name, $responses, $first, $second, $tolerance) = @_;
    my $last = max(map { $_->{group} } @$responses);
    for my $g (0 .. $last) {
        my @x = outcome($responses, $g, $first);
        my @y = outcome($responses, $g, $second);
        my ($read0) = sort { $a <=> $b }
                      grep { defined } map { $_->{started} } @x, @y;
        my $ms = sub {
            defined $_[0] ? int(1000 * ($_[0] - $read0) + 0.5) : '-';
        };
        my $show = sub {
            join ', ', map {
                ($_->{status} // $_->{error}) . ' read ' . $ms->($_->{started})
                    . ' answered ' . $ms->($_->{answered})
            } @_;
        };
        my @far = grep {
            !defined $x[$_]{answered} || !defined $y[$_]{answered}
                || abs($x[$_]{answered} - $y[$_]{answered})
                   > $tolerance + abs($x[$_]{started} - $y[$_]{started})
        } 0 .. $#x;
        Test::More::ok(
            "@{[ sort map { $_->{status} // 'none' } @x ]}"
                eq "@{[ sort map { $_->{status} // 'none' } @y ]}" && !@far,
            "$name: group $g: $second as $first, within "
                . int($tolerance * 1000) . ' ms')
            or Test::More::diag("on nginx's clock, ms from the group's first "
                                . "request read:\n$first: " . $show->(@x)
                                . "\n$second: " . $show->(@y));
    }
}

# How far apart two times may be, in seconds: 40 ms, or
# TEST_TIMING_TOLERANCE_MS (the sanitized runs, whose nginx is slower).
sub tolerance { ($ENV{TEST_TIMING_TOLERANCE_MS} || 40) / 1000 }

# $count requests to $uri with X-Key: $key sent at once to the nginx on
# $port, and $run called $at seconds later if given; the responses,
# quickest first.
sub burst {
    my ($port, $count, $uri, $key, $at, $run) = @_;
    my @steps = map { { at => 0, uri => $uri, headers => ['X-Key' => $key] } }
                1 .. $count;
    push @steps, { at => $at, run => $run } if $run;
    return by_answer(fire($port, \@steps));
}

# For each response, how long after nginx began reading the first of them
# it answered, in ms (undef: not answered, or no X-Timing).
sub nginx_waits {
    my @responses = @_;
    my ($first) = sort { $a <=> $b }
                  grep { defined } map { $_->{started} } @responses;
    return map {
        defined $_->{answered} && defined $first
            ? int(1000 * ($_->{answered} - $first) + 0.5) : undef
    } @responses;
}

# A test: the responses' statuses, quickest first, as @want ("200 x3").
sub statuses_are {
    my ($name, $title, $responses, @want) = @_;
    my @expanded = map { /^(\d+) x(\d+)$/ ? ($1) x $2 : $_ } @want;
    Test::More::is("@{[ map { $_->{status} // $_->{error} } @$responses ]}",
       "@expanded", "$name: $title: statuses");
}

# A test: the responses waited @want_ms (quickest first): none less on
# the client's clock, from their offset (but for the rounding to ms), and
# at most tolerance() more on nginx's, from when it began reading the
# first of them. (The quickest wait with the quickest want on each clock:
# if each response holds to its own wait, so do they.)
sub waits_are {
    my ($name, $title, $responses, @want_ms) = @_;
    my @took = sort { $a <=> $b }
               map { int(1000 * ($_->{took} // -1)) } @$responses;
    my @nginx = sort { $a <=> $b } map { $_ // 1e9 } nginx_waits(@$responses);
    my @off = grep {
        $took[$_] - $want_ms[$_] < -2
            || $nginx[$_] - $want_ms[$_] > 1000 * tolerance();
    } 0 .. $#want_ms;
    my @written = map {
        defined $_->{sent} ? int(1000 * ($_->{sent} - $_->{at})) : '-'
    } @$responses;
    Test::More::ok(!@off && @took == @want_ms, "$name: $title: waits @want_ms ms")
        or Test::More::diag("took: @took ms on the client's clock (written "
                            . "@written ms after their offset), @nginx ms on "
                            . "nginx's");
}

# A test: a header's values over the responses, as @want (a number
# written ~N: at most N, or a ms more: nginx's timers count whole
# milliseconds of a clock it reads once per event; and at least N -
# tolerance() in ms, less as long as nginx began reading the request
# after the first of them: a request the client wrote late waits less).
sub header_values_are {
    my ($name, $title, $responses, $header, @want) = @_;
    my @got = map { $_->{headers}{ lc $header } // '(none)' } @$responses;
    my ($first) = sort { $a <=> $b }
                  grep { defined } map { $_->{started} } @$responses;
    my @read_late = map {
        defined $_->{started} ? 1000 * ($_->{started} - $first) : 0
    } @$responses;
    my @off = grep {
        my ($g, $w) = ($got[$_], $want[$_] // '(more)');
        my ($near) = $w =~ /^~(\d+)$/;
        defined $near
            ? !($g =~ /^\d+$/ && $g <= $near + 1
                && $g + $read_late[$_] >= $near - 1000 * tolerance())
            : $g ne $w;
    } 0 .. $#got;
    Test::More::ok(!@off && @got == @want, "$name: $title: $header @want")
        or Test::More::diag("$header: @got");
}

# Tests that requests held back finish when nginx is told to quit: 4 to
# /a.txt at once (X-Key: k; a zone of 5r/s and delay=0 holds them 0, 200,
# 400 and 600 ms), SIGQUIT to the master 0.1 s in; then nginx exits.
sub quit_while_waiting {
    my ($name, $nginx) = @_;
    my $master = $nginx->{master};
    my @res = burst($nginx->{port}, 4, '/a.txt', 'k', 0.1,
                    sub { kill 'QUIT', $master });
    statuses_are($name, 'quit', \@res, '200 x4');
    waits_are($name, 'quit', \@res, 0, 200, 400, 600);
    Test::More::ok(Processes::wait_gone(5, $master),
                   "$name: nginx has exited");
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
    $state->{took} = $now - $state->{step}{at};
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
    if (($res{headers}{'x-timing'} // '') =~ /^([\d.]+) ([\d.]+)$/) {
        @res{qw(started answered)} = ($1 - $2, $1);
    }
    return \%res;
}

1;
