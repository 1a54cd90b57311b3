# SPDX-License-Identifier: BSD-2-Clause
package Failover;

# How long after a failover the module decides again, for t/redis_cluster.t
# and t/redis_sentinel.t: requests at a steady pace while a master is
# killed, the moment Redis itself had a new master (seen by a child that
# polls for it), and the time from that moment to the first round of
# requests after which none fell to throttle_on_error.

use strict;
use warnings;

use Exporter 'import';
use File::Temp;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);

use ClusterTraffic qw(traffic_around);
use Processes qw($TIMEOUT fork_child kill_wait wait_until read_file);

our @EXPORT_OK = qw(when_true when_announced steady_rounds back_after
                    median worst);

# A child that calls $cond every 5 ms until it is true and writes the time
# it was; returns a sub that waits for that time (undef after $TIMEOUT x 3).
# $cond runs in the child: it must open connections of its own.
sub when_true {
    my ($cond) = @_;
    my $file = File::Temp->new;
    my $pid = fork_child(sub {
        until ($cond->()) { sleep 0.005 }
        my $at = time;
        open my $fh, '>', "$file" or POSIX::_exit(1);
        printf $fh "%.6f\n", $at;
        close $fh;
        POSIX::_exit(0);
    });
    return sub {
        my $at = wait_until($TIMEOUT * 3, sub { (read_file("$file") // '') =~ /^([\d.]+)$/m && $1 });
        kill_wait($pid, 'TERM');
        undef $file if $at;
        return $at || undef;
    };
}

# The moment a Sentinel on $port publishes "+switch-master" for $name, as a
# subscriber hears it; the same kind of sub as when_true.
sub when_announced {
    my ($port, $name, $password) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => $TIMEOUT)
        or die "connect to the sentinel on $port: $!";
    print $sock "AUTH $password\r\n" if defined $password;
    print $sock "SUBSCRIBE +switch-master\r\n";
    my $heard = '';
    my $wait = when_true(sub {
        sysread($sock, $heard, 4096, length $heard) or POSIX::_exit(1);
        return $heard =~ /\+switch-master\r\n\$\d+\r\n\Q$name\E /;
    });
    close $sock;    # the child's now
    return $wait;
}

# ClusterTraffic's traffic_around, a round every $period s, told as rounds:
# ([{ at => when it was sent, errors => how many of its answers were not
# PASSED or REJECTED }] in order, the time the event ran).
sub steady_rounds {
    my ($nodes, $uri, $keys, $seconds, $period, $event_at, $event) = @_;
    my ($res, $event_time) = traffic_around($nodes, $uri, $keys, $seconds,
                                            $event_at, $event, $period);
    my @rounds;
    for my $r (@$res) {
        push @rounds, { at => $r->{at}, errors => 0 }
            unless @rounds && $rounds[-1]{at} == $r->{at};
        $rounds[-1]{errors}++ if $r->{x_status} !~ /^(PASSED|REJECTED)$/;
    }
    return (\@rounds, $event_time);
}

# Seconds from $moment to the first round sent after the last round that
# had an error (negative if decisions were back before $moment); undef if
# the last round had one.
sub back_after {
    my ($rounds, $moment) = @_;
    my $last = -1;
    $rounds->[$_]{errors} and $last = $_ for 0 .. $#$rounds;
    return undef if $last == $#$rounds;
    return $rounds->[$last + 1]{at} - $moment;
}

sub median {
    my @s = sort { $a <=> $b } @_;
    return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
}

sub worst { (sort { $b <=> $a } @_)[0] }

1;
