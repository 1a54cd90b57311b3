# SPDX-License-Identifier: BSD-2-Clause
package Clock;

# Waits for the wall clock, for tests whose windows are aligned on it (a
# window that turned in the middle of a test would count anew):
#
#     hour_guard($secs)     sleeps past the next turn of the hour (by half
#                           a second) if it is due within $secs
#     minute_guard($need)   sleeps until second 1 of the next minute
#                           unless $need seconds are left in this one and
#                           it is past second 0.5
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use Time::HiRes ();

our @EXPORT_OK = qw(hour_guard minute_guard);

sub hour_guard {
    my ($secs) = @_;
    my $time = Time::HiRes::time();
    my $left = 3600 - ($time - 3600 * int($time / 3600));
    return if $left >= $secs;
    Test::More::note(sprintf 'waiting %.1f s for the hour to turn', $left + 0.5);
    Time::HiRes::sleep($left + 0.5);
}

sub minute_guard {
    my ($need) = @_;
    my $time = Time::HiRes::time();
    my $into = $time - 60 * int($time / 60);
    if ($into < 0.5 || $into > 60 - $need) {
        my $wait = 61 - $into;
        $wait -= 60 if $wait > 60;
        Test::More::note(sprintf 'waiting %.1f s for the minute to turn', $wait);
        Time::HiRes::sleep($wait);
    }
}

1;
