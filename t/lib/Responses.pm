# SPDX-License-Identifier: BSD-2-Clause
package Responses;

# Readers of the responses that http_request and http_parallel
# (ThrottleTest::Http) return, { status, headers => { lc name => [values]
# }, body, elapsed, error }, for plain scripts and the helpers of test
# files:
#
#     hdr($res, 'RateLimit')    the header's first value, or undef
#     ratelimit_of($res)        the RateLimit header's fields: (zone, r, t),
#                               or () without one
#     status_of($res)           the status, or "error: WHY" (no response)
#     count_statuses(@res)      { status_of => how many responses had it }
#     fmt_counts(\%count)       a tally as text, keys sorted: "200 x10,
#                               429 x2"
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(hdr ratelimit_of status_of count_statuses fmt_counts);

sub hdr {
    my ($res, $name) = @_;
    my $v = $res->{headers}{ lc $name };
    return $v ? $v->[0] : undef;
}

sub ratelimit_of {
    my $v = hdr($_[0], 'RateLimit') // '';
    return $v =~ /^"([^"]+)";r=(\d+);t=(\d+)$/ ? ($1, $2, $3) : ();
}

sub status_of { $_[0]{status} // "error: " . ($_[0]{error} // '?') }

sub count_statuses {
    my %count;
    $count{ status_of($_) }++ for @_;
    return \%count;
}

sub fmt_counts {
    my ($h) = @_;
    return join ', ', map { "$_ x$h->{$_}" } sort keys %$h;
}

1;
