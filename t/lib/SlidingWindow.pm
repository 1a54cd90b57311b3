# SPDX-License-Identifier: BSD-2-Clause
package SlidingWindow;

# sliding_window's decision as docs/algorithms.md states it, written apart
# from the module's (src/throttle/sliding_window.cpp) so that a test can hold
# one against the other: the previous window weighs by the time left of it,
# in the same doubles.
#
# decide($state, $now, $w, $limit, $cost): $state is [window start, count of
# the previous window, count of this one], times in us; returns { limited,
# remaining, reset, retry, state }.

use strict;
use warnings;

use POSIX qw(floor);

sub decide {
    my ($st, $now, $w, $l, $cost) = @_;
    my $start = $now - $now % $w;
    my ($prev, $cur) = (0, 0);
    if ($st->[0] == $start) {
        ($prev, $cur) = ($st->[1], $st->[2]);
    } elsif ($st->[0] == $start - $w) {
        $prev = $st->[2];
    }
    my $el = $now - $start;
    my $weighted = sub { my ($e, $p, $c) = @_; (($p * ($w - $e)) / $w) + $c };
    my $fits = sub { $weighted->(@_) + $cost <= $l };
    my $wnow = $weighted->($el, $prev, $cur);
    my %d = (limited => 0, retry => -1, state => [@$st]);
    if ($wnow + $cost <= $l) {
        my $left = $l - ($wnow + $cost);
        $d{remaining} = $left > 0 ? floor($left) : 0;
        $cur += $cost;
        $d{state} = [$start, $prev, $cur];
    } else {
        my $left = $l - $wnow;
        $d{limited} = 1;
        $d{remaining} = $left > 0 ? floor($left) : 0;
        my $found;
        if ($prev > 0 && $cur + $cost <= $l) {
            my $e = POSIX::ceil($w - ((($l - $cur - $cost) * $w) / $prev));
            $e = $el if $e < $el;
            $e++ while $e < $w && !$fits->($e, $prev, $cur);
            if ($e < $w) {
                $d{retry} = $start + $e - $now;
                $found = 1;
            }
        }
        unless ($found) {
            my $e = $cur > 0 ? POSIX::ceil($w - ((($l - $cost) * $w) / $cur)) : 0;
            $e = 0 if $e < 0;
            $e++ until $fits->($e, $cur, 0);
            $d{retry} = $start + $w + $e - $now;
        }
    }
    $d{reset} = $cur > 0 ? $start + 2 * $w - $now
              : $prev > 0 ? $start + $w - $now : 0;
    return \%d;
}

1;
