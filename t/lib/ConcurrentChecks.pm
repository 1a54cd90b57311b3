# SPDX-License-Identifier: BSD-2-Clause
package ConcurrentChecks;

# The checks t/concurrent.t and t/redis_concurrent.t share: requests of a
# concurrent= zone held in flight at the SlowBackend (t/lib/InFlight.pm),
# and what their answers must say. A file first names its backend:
#
#     ConcurrentChecks::backend($backend);
#
#     held($name, $env, 'alice', '/slow?hold=1')
#         a request of alice's admitted and held: its socket; undef and
#         a failed test if nginx answered it instead
#     held_n($name, $env, 3, 'alice', '/slow?hold=1')
#         that many, one after the other (their RateLimit r= count down
#         in order): the sockets of those admitted
#     refused_ok($name, $env, 'alice', '/slow?hold=1', 'streams')
#         a request refused at once, with a refusal's headers: 429,
#         Retry-After: 1, RateLimit "<zone>";r=0 (no t),
#         RateLimit-Policy "<zone>";q=3 (no w), $throttle_status REJECTED
#         and $throttle_remaining 0 (X-Status, X-Remaining); its response
#     admitted_ok($name, $res, 2, 'streams')
#         an admitted request's answer with 2 places left after it: 200,
#         RateLimit-Policy "<zone>";q=3, RateLimit "<zone>";r=2,
#         X-Status PASSED, X-Limit 3, X-Remaining 2, no Retry-After
#     (both take the zone's limit last, when it is not 3)
#     release_all('alice', @socks)
#         the backend lets alice's held requests go: their responses
#     three_free_ok($name, $env, 'alice', '/slow?hold=1', 'streams')
#         alice's 3 places are all free: 3 requests held, a 4th refused,
#         then the 3 let go (and answered 200)
#
# The zone's location must add X-Status ($throttle_status), X-Limit
# ($throttle_limit) and X-Remaining ($throttle_remaining), always.

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use InFlight qw(hold finish);
use Responses qw(hdr status_of);
use ThrottleTest::Http ();

our @EXPORT_OK = qw(held held_n refused_ok admitted_ok release_all
                    three_free_ok);

my $BACKEND;

sub backend { $BACKEND = $_[0] }

sub held {
    my ($name, $env, $key, $uri) = @_;
    my ($sock, $res) = hold($env, $BACKEND, $key, $uri);
    return $sock if $sock;
    Test::More::fail("$name: $uri ($key) is admitted and held");
    Test::More::diag('got ' . status_of($res) . "\n"
                     . ThrottleTest::Http::dump_response($res));
    return undef;
}

sub held_n {
    my ($name, $env, $n, $key, $uri) = @_;
    my @socks;
    for my $i (1 .. $n) {
        my $s = held("$name (#$i)", $env, $key, $uri) or last;
        push @socks, $s;
    }
    return @socks;
}

sub refused_ok {
    my ($name, $env, $key, $uri, $zone, $limit) = @_;
    $limit //= 3;
    my ($sock, $res) = hold($env, $BACKEND, $key, $uri);
    if ($sock) {
        Test::More::fail("$name: refused");
        Test::More::diag("$uri ($key) was let through to the backend");
        return;
    }
    Test::More::is(status_of($res), 429, "$name: 429");
    Test::More::is(hdr($res, 'Retry-After'), 1, "$name: Retry-After: 1");
    Test::More::is(hdr($res, 'RateLimit'), qq{"$zone";r=0},
                   "$name: RateLimit r=0, no t");
    Test::More::is(hdr($res, 'RateLimit-Policy'), qq{"$zone";q=$limit},
                   "$name: RateLimit-Policy q=$limit, no w");
    Test::More::is(hdr($res, 'X-Status'), 'REJECTED',
                   "$name: \$throttle_status");
    Test::More::is(hdr($res, 'X-Remaining'), 0, "$name: \$throttle_remaining");
    return $res;
}

sub admitted_ok {
    my ($name, $res, $left, $zone, $limit) = @_;
    $limit //= 3;
    Test::More::is(status_of($res), 200, "$name: 200");
    Test::More::is(hdr($res, 'RateLimit-Policy'), qq{"$zone";q=$limit},
                   "$name: RateLimit-Policy q=$limit, no w");
    Test::More::is(hdr($res, 'RateLimit'), qq{"$zone";r=$left},
                   "$name: RateLimit r=$left, no t");
    Test::More::is(hdr($res, 'X-Status'), 'PASSED', "$name: \$throttle_status");
    Test::More::is(hdr($res, 'X-Limit'), $limit, "$name: \$throttle_limit");
    Test::More::is(hdr($res, 'X-Remaining'), $left,
                   "$name: \$throttle_remaining");
    Test::More::ok(!defined hdr($res, 'Retry-After'), "$name: no Retry-After");
}

sub release_all {
    my ($key, @socks) = @_;
    $BACKEND->release($key);
    return map { finish($_) } @socks;
}

sub three_free_ok {
    my ($name, $env, $key, $uri, $zone) = @_;
    my @socks = held_n("$name: 3 again", $env, 3, $key, $uri);
    Test::More::is(scalar @socks, 3, "$name: 3 requests in flight again");
    refused_ok("$name: and the 4th", $env, $key, $uri, $zone) if @socks == 3;
    my @res = release_all($key, @socks);
    Test::More::is(join(' ', map { status_of($_) } @res),
                   join(' ', (200) x @socks), "$name: they end with 200");
}

1;
