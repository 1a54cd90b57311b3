# SPDX-License-Identifier: BSD-2-Clause
package ClusterTraffic;

# Requests for the cluster and sentinel tests (t/redis_cluster.t,
# t/redis_sentinel.t): keys picked by the master their slot lives on,
# batches written to several nginx at once, and the tallies the tests
# check (statuses, $throttle_status, admissions per key).

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use Time::HiRes qw(time);
use ThrottleTest ();

our @EXPORT_OK = qw(keys_on_master at_once tally no_crash
                    traffic_around show part burst_is_exact);

# $count key names PREFIX<n> whose slot lies on master $index of the
# cluster (masters order), and, with $below, in a slot below it.
sub keys_on_master {
    my ($cluster, $index, $count, $prefix, $below) = @_;
    my $ranges = $cluster->slots_of(($cluster->masters)[$index]);
    my @keys;
    for my $n (0 .. 100_000) {
        my $slot = $cluster->slot_of("$prefix$n");
        next if defined $below && $slot >= $below;
        next unless grep { $slot >= $_->[0] && $slot <= $_->[1] } @$ranges;
        push @keys, "$prefix$n";
        return @keys if @keys == $count;
    }
    die "keys_on_master: fewer than $count keys of $prefix on master $index\n";
}

# Requests [node (an instance), uri, key], each on its own connection,
# all written before any response is read (the nodes decide them at
# once). Returns them in order as { node, uri, key, status, x_status,
# elapsed, error }.
sub at_once {
    my (@reqs) = @_;
    my @socks = map { ThrottleTest::connect_to($_->[0]) } @reqs;
    my $t0 = time;
    for my $i (0 .. $#reqs) {
        my ($node, $uri, $key) = @{ $reqs[$i] };
        syswrite $socks[$i], "GET $uri HTTP/1.1\r\nHost: localhost\r\n"
                           . "X-Key: $key\r\nConnection: close\r\n\r\n"
            if $socks[$i];
    }
    my @out;
    for my $i (0 .. $#reqs) {
        my ($node, $uri, $key) = @{ $reqs[$i] };
        my $res = $socks[$i] ? ThrottleTest::http_read($socks[$i], { method => 'GET' })
                             : { error => "connect: $!" };
        close $socks[$i] if $socks[$i];
        push @out, { node => $node, uri => $uri, key => $key,
                     status => $res->{status} // 'none',
                     x_status => $res->{headers}{'x-status'}[0] // 'none',
                     elapsed => time - $t0, error => $res->{error} };
    }
    return @out;
}

# Rounds of requests (one per key of @$keys on $uri, to the nodes in
# turn, all at once) for $seconds, one every $period seconds if given,
# else one after the other; $event->() runs once, $event_at seconds in.
# Returns (the responses, each with {at}: when its round was sent; the
# time the event ran).
sub traffic_around {
    my ($nodes, $uri, $keys, $seconds, $event_at, $event, $period) = @_;
    my (@res, $event_time);
    my $t0 = time;
    while (time - $t0 < $seconds) {
        if (!$event_time && time - $t0 >= $event_at) {
            $event->();
            $event_time = time;
        }
        my $sent = time;
        push @res, map { $_->{at} = $sent; $_ }
            at_once(map { [$nodes->[$_ % @$nodes], $uri, $keys->[$_]] } 0 .. $#$keys);
        my $left = ($period // 0) - (time - $sent);
        Time::HiRes::sleep($left) if $left > 0;
    }
    return (\@res, $event_time);
}

# Tallies of responses: { admitted => { key => n }, status => { code =>
# n }, x_status => { value => n }, errors => [responses whose
# $throttle_status is ERROR_* or that did not come] }.
sub tally {
    my (@res) = @_;
    my %t = (admitted => {}, status => {}, x_status => {}, errors => []);
    for my $r (@res) {
        $t{admitted}{ $r->{key} } += $r->{status} eq '200' ? 1 : 0;
        $t{status}{ $r->{status} }++;
        $t{x_status}{ $r->{x_status} }++;
        push @{ $t{errors} }, $r
            if $r->{x_status} !~ /^(PASSED|REJECTED)$/;
    }
    return \%t;
}

# Each key of @keys gets $sent requests on $uri, to the nodes of @$nodes in
# turn, all at once: exactly $want pass per key, and none gets ERROR_*.
# Returns their tally.
sub burst_is_exact {
    my ($label, $nodes, $uri, $sent, $want, @keys) = @_;
    my @reqs = map { my $k = $_; map { [$nodes->[$_ % @$nodes], $uri, $k] } 1 .. $sent }
               @keys;
    my $t = tally(at_once(@reqs));
    Test::More::is(show(@{ $t->{errors} }), '', "$label: no ERROR_* (nor a missing answer)");
    Test::More::is_deeply($t->{admitted}, { map { $_ => $want } @keys },
                          "$label: each key admits exactly $want")
        or Test::More::diag(Test::More::explain($t->{admitted}));
    return $t;
}

# Responses, one line each, for diagnostics.
sub show {
    return join "\n", map { "$_->{key} $_->{uri}: $_->{status} $_->{x_status} "
                            . ($_->{error} // '') } @_;
}

# Runs $code, a part of a test file; a part that dies is one failed test.
sub part {
    my ($label, $code) = @_;
    eval { $code->(); 1 } or Test::More::fail("$label: ran to the end: $@");
}

# An instance stopped, its error.log checked: no worker crash, alert or
# crit. Returns the log.
sub no_crash {
    my ($node, $label) = @_;
    my $log = ThrottleTest::stop_instance($node);
    Test::More::unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
                       "$label: no crash, alert or crit in error.log");
    return $log;
}

1;
