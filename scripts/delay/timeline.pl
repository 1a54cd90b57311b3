#!/usr/bin/perl
# SPDX-License-Identifier: BSD-2-Clause
# The data of docs/delay.png: two bursts sent at once to a throttle
# location with delay= and to a limit_req location with the same rate,
# burst and delay (the nginx scripts/delay/run.sh starts on port
# $ARGV[0]), and when each request left. Writes to $ARGV[1], one line per
# request of each burst: those admitted in the order they left, then
# those rejected (the limit_req request in the same place beside each):
#   n  sent_ms  throttle_left_ms  throttle_status  limit_req_left_ms  limit_req_status
# (left: when its response was whole; a rejected one leaves at once).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../../t/lib";
use Timeline;

my ($port, $out) = @ARGV;
die "usage: $0 PORT OUTFILE\n" unless $out;

# 14 at once: burst=9 admits 10, delay=3 lets 4 go at once; 1.2 s later,
# 6 into a funnel drained again
my @groups = ([0, 14], [1.2, 6]);
my @res = Timeline::fire($port, [
    Timeline::groups(\@groups, [qw(throttle limit_req)], 'X-Key' => 'k')]);

my @failed = grep { $_->{error} } @res;
die "timeline: a request failed: $failed[0]{error}\n" if @failed;

open my $fh, '>', $out or die "$out: $!\n";
print $fh "# n sent_ms throttle_left_ms throttle_status "
        . "limit_req_left_ms limit_req_status\n";
my $n = 0;
for my $g (0 .. $#groups) {
    my @t = admitted_first(Timeline::outcome(\@res, $g, 'throttle'));
    my @l = admitted_first(Timeline::outcome(\@res, $g, 'limit_req'));
    for my $i (0 .. $#t) {
        my $at = 1000 * $groups[$g][0];
        printf $fh "%d %.1f %.1f %s %.1f %s\n", ++$n, $at,
               $at + 1000 * $t[$i]{took}, $t[$i]{status},
               $at + 1000 * $l[$i]{took}, $l[$i]{status};
    }
}
close $fh;

sub admitted_first {
    return ((grep { $_->{status} == 200 } @_), grep { $_->{status} != 200 } @_);
}
