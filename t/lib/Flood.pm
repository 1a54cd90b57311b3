# SPDX-License-Identifier: BSD-2-Clause
package Flood;

# Floods for the tests of flooded zones (t/flood.t, t/redis_flood.t,
# t/flood_edges.t), and what one exact funnel would have admitted of them:
#
#     pipelined($port, $prefix, $count)
#         $count requests GET /a.txt, X-Key <prefix>0, <prefix>1..., in
#         batches of 1000 pipelined over one keep-alive connection (the
#         location needs keepalive_requests that high); { status => count }
#     my $f = fork_pipelined($port, $file, $count, @prefixes)
#         one forked pipelined() per prefix, $count requests each, its
#         counts written to "$file.<i>"
#     running($f)         whether one of them is still at it
#     counts($f)          waits for them all: their { status => count },
#                         summed (and error => n, why => ... for clients
#                         that died)
#     wrk_path()          wrk's path, or '' when it is not installed
#     start_wrk(url => U, connections => C, seconds => S,
#               headers => [H, ...], keys => [K, ...], dir => D)
#         starts wrk (one thread) on U: with keys, a Lua script in D gives
#         the requests X-Key K1, K2... in turn; returns a handle
#     finish_wrk(@handles)   their outputs, once each has ended
#     wrk_figures(@outputs)  { requests, non2xx, errors (socket errors of
#                            every kind) }, summed over the outputs
#     funnel_bounds($rate, $burst, \@times, $slack)
#         (floor, ceiling, span): what one exact funnel of $rate a second
#         and $burst admits of a flood over the span from the first to the
#         last of @times (seconds), give or take $slack seconds of that
#         span (default 0.1: a log's milliseconds, and the time a flooded
#         worker takes to answer)
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';
use IO::Socket::INET;
use List::Util qw(max min);
use POSIX ();

our @EXPORT_OK = qw(pipelined fork_pipelined running counts wrk_path
                    start_wrk finish_wrk wrk_figures funnel_bounds);

sub pipelined {
    my ($port, $prefix, $count) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port")
        or die "connect: $!";
    my (%status, $buf);
    my $batch = 1000;
    for (my $sent = 0; $sent < $count; $sent += $batch) {
        my $n = $count - $sent < $batch ? $count - $sent : $batch;
        my $out = join '', map {
            "GET /a.txt HTTP/1.1\r\nHost: flood\r\nX-Key: $prefix"
                . ($sent + $_) . "\r\n\r\n"
        } 0 .. $n - 1;
        while (length $out) {
            my $w = syswrite($sock, $out) // die "write: $!";
            substr($out, 0, $w, '');
        }
        my $seen = 0;
        $buf = '';
        while ($seen < $n) {
            my $r = sysread($sock, $buf, 1 << 20, length $buf)
                // die "read: $!";
            die "nginx closed the connection\n" unless $r;
            # a status line is whole once the headers' end follows it
            while ($buf =~ /\AHTTP\/1\.1 (\d{3}) .*?\r\n\r\n/s) {
                my $status = $1;
                my ($len) = $buf =~ /\AHTTP.*?\r\ncontent-length: (\d+)\r\n/si;
                my $head = index($buf, "\r\n\r\n") + 4;
                last if length($buf) < $head + ($len // 0);
                substr($buf, 0, $head + ($len // 0), '');
                $status{$status}++;
                $seen++;
            }
        }
    }
    close $sock;
    return \%status;
}

sub fork_pipelined {
    my ($port, $file, $count, @prefixes) = @_;
    my $f = { pids => [], files => [] };
    for my $i (0 .. $#prefixes) {
        my $out = "$file.$i";
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            # the child never returns to the harness
            my $s = eval { pipelined($port, $prefixes[$i], $count) }
                // { error => 1, why => $@ =~ s/\s+/_/gr };
            if (open my $fh, '>', $out) {
                print $fh join(' ', map { "$_=$s->{$_}" } sort keys %$s), "\n";
                close $fh;
            }
            POSIX::_exit(0);
        }
        push @{ $f->{pids} }, $pid;
        push @{ $f->{files} }, $out;
    }
    return $f;
}

sub running {
    my ($f) = @_;
    $f->{done}{$_} ||= waitpid($_, POSIX::WNOHANG()) != 0 for @{ $f->{pids} };
    return scalar grep { !$f->{done}{$_} } @{ $f->{pids} };
}

sub counts {
    my ($f) = @_;
    waitpid($_, 0) for grep { !$f->{done}{$_} } @{ $f->{pids} };
    $f->{done}{$_} = 1 for @{ $f->{pids} };
    my %sum;
    for my $file (@{ $f->{files} }) {
        my $line = '';
        if (open my $fh, '<', $file) {
            $line = <$fh> // '';
            close $fh;
        }
        $sum{error}++ unless $line =~ /=/;
        for (split ' ', $line) {
            my ($s, $n) = split /=/, $_, 2;
            if ($n =~ /^\d+$/) { $sum{$s} += $n } else { $sum{$s} = $n }
        }
    }
    return \%sum;
}

sub wrk_path {
    chomp(my $wrk = `command -v wrk 2>/dev/null` // '');
    return $wrk;
}

sub start_wrk {
    my (%o) = @_;
    my @args = ('-t1', "-c$o{connections}", "-d$o{seconds}s");
    push @args, '-H', $_ for @{ $o{headers} || [] };
    if ($o{keys}) {
        my $script = "$o{dir}/keys-" . scalar(@{ $o{keys} }) . '.lua';
        open my $fh, '>', $script or die "$script: $!";
        print $fh 'local keys = {', join(', ', map { "\"$_\"" } @{ $o{keys} }),
                  "}\nlocal i = 0\nrequest = function()\n"
                  . "    i = i % #keys + 1\n"
                  . "    return wrk.format(nil, nil, { [\"X-Key\"] = keys[i] })\n"
                  . "end\n";
        close $fh;
        push @args, '-s', $script;
    }
    my $wrk = wrk_path() or die "wrk is not installed\n";
    open my $out, '-|', $wrk, @args, $o{url} or die "wrk: $!";
    return $out;
}

sub finish_wrk {
    return map { local $/; my $o = readline $_; close $_; $o // '' } @_;
}

sub wrk_figures {
    my %f = (requests => 0, non2xx => 0, errors => 0);
    for my $o (@_) {
        $f{requests} += $1 if $o =~ /(\d+) requests in/;
        $f{non2xx}   += $1 if $o =~ /Non-2xx or 3xx responses: (\d+)/;
        $f{errors}   += $1 + $2 + $3 + $4
            if $o =~ /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/;
    }
    return \%f;
}

sub funnel_bounds {
    my ($rate, $burst, $times, $slack) = @_;
    $slack //= 0.1;
    my $span = @$times ? max(@$times) - min(@$times) : 0;
    return (int($rate * ($span - $slack)) + $burst + 1,
            int($rate * ($span + $slack)) + $burst + 1, $span);
}

1;
