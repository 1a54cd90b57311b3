# SPDX-License-Identifier: BSD-2-Clause
package SettleChecks;

# Checks of settle= for the perl steps of test blocks (they run with
# $ThrottleTest::Step::CURRENT, the block's nginx):
#
#     settled_lines_are($name, @want)
#         once logs/settled.log has as many lines as @want, they are
#         @want (the server under test logs there what its blocks say,
#         "$throttle_settled $status" in t/settle.t)
#     settles_are($name, %want)
#     settles_are($name, zone => 'logins', %want)
#         waits until the zone's nginx_throttle_settles_total (zone
#         "tokens" unless named) are %want by result (0 for those not
#         named; a strict zone's are counted when Redis answers), then
#         checks them
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';
use Processes ();
use Test::More ();
use ThrottleTest::Step ();

our @EXPORT_OK = qw(settled_lines_are settles_are);

sub settled_lines_are {
    my ($name, @want) = @_;
    my $log = "$ThrottleTest::Step::CURRENT->{prefix}/logs/settled.log";
    my $lines = sub { [split /\n/, -e $log ? Processes::read_file($log) : ''] };
    Processes::wait_until($Processes::TIMEOUT,
                          sub { @{ $lines->() } >= @want });
    Test::More::is_deeply($lines->(), \@want,
                          "$name: \$throttle_settled and status per request");
}

sub settles_are {
    my ($name, %want) = @_;
    my $zone = delete $want{zone} // 'tokens';
    my $got = sub {
        my $m = ThrottleTest::Step::metrics();
        return { map {
            $_ => $m->{"nginx_throttle_settles_total{zone=\"$zone\",result=\"$_\"}"} // 0
        } qw(charged refunded even invalid lost) };
    };
    my %all = (charged => 0, refunded => 0, even => 0, invalid => 0,
               lost => 0, %want);
    Processes::wait_until($Processes::TIMEOUT, sub {
        my $g = $got->();
        !grep { $g->{$_} != $all{$_} } keys %all;
    });
    Test::More::is_deeply($got->(), \%all,
                          "$name: settles counted" . ($zone eq 'tokens' ? '' : " in $zone"));
}

1;
