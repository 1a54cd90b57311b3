# SPDX-License-Identifier: BSD-2-Clause
package ThrottleApi;

# What the throttle_api tests (t/api.t, t/redis_api.t, t/api_settle.t,
# t/api_reset.t) call from their perl steps: calls to the endpoint at
# /throttle, checks of its JSON answers, and a property test of one key's
# budget shared by HTTP requests and API calls.

use strict;
use warnings;

use Exporter 'import';
use JSON::PP ();
use Test::More ();
use ThrottleTest ();

our @EXPORT_OK = qw(json_of api_get api_post answer_is error_is one_funnel
                    settled_is reservation_of api_delete reset_is);

sub request { ThrottleTest::Step::request(@_) }
sub header  { ThrottleTest::Step::header(@_) }

# The body of a response as JSON, after checking that it is JSON: UTF-8
# that JSON::PP decodes; undef (a failed test) when it is not.
sub json_of {
    my ($name, $res) = @_;
    my $body = $res->{body} // '';
    my $json = eval { JSON::PP->new->utf8->decode($body) };
    Test::More::ok(defined $json, "$name: the body is valid JSON")
        or Test::More::diag("$@\nbody: $body");
    return $json;
}

# GET /throttle?QUERY: the response, and its JSON.
sub api_get {
    my ($name, $query, @headers) = @_;
    my $res = request("GET /throttle?$query", @headers);
    return ($res, json_of($name, $res));
}

# POST /throttle with a JSON body (a string, or a structure to encode).
sub api_post {
    my ($name, $body, @headers) = @_;
    $body = JSON::PP->new->utf8->canonical->encode($body) if ref $body;
    my $res = request('POST /throttle', 'Content-Type' => 'application/json',
                      @headers, \$body);
    return ($res, json_of($name, $res));
}

# DELETE /throttle?QUERY (a reset), or, with $body (a string, or a
# structure to encode), DELETE /throttle with it as a JSON body (QUERY
# then goes too, if not empty).
sub api_delete {
    my ($name, $query, $body, @headers) = @_;
    my $uri = '/throttle' . (length($query // '') ? "?$query" : '');
    if (defined $body) {
        $body = JSON::PP->new->utf8->canonical->encode($body) if ref $body;
        unshift @headers, 'Content-Type' => 'application/json';
        push @headers, \$body;
    }
    my $res = request("DELETE $uri", @headers);
    return ($res, json_of($name, $res));
}

# Checks a reset's answer: 200, and {"reset":true,"checks":[{"zone":...,
# "key":...,"status":"RESET","units_dropped":N}]}.
sub reset_is {
    my ($name, $res, $json, $zone, $key, $units_dropped) = @_;
    json_200_is("$name: reset, $units_dropped units dropped", $res, $json, {
        reset => JSON::PP::true,
        checks => [ { zone => $zone, key => $key, status => 'RESET',
                      units_dropped => $units_dropped } ] });
}

# A 200 whose JSON is exactly $want.
sub json_200_is {
    my ($name, $res, $json, $want) = @_;
    Test::More::is($res->{status}, 200, "$name: status 200");
    Test::More::is(header($res, 'Content-Type'), 'application/json',
                   "$name: Content-Type");
    return unless $json;
    Test::More::is_deeply($json, $want, $name)
        or Test::More::diag($res->{body});
}

my @FIELDS = qw(delay_ms key limit remaining reset_after_ms retry_after_ms
                status zone);

# A charged check's "reservation": opaque to callers, but its form is
# checked here ("1.<cost>.<at>.<token>.<token>").
my $RESERVATION = qr/^1\.[1-9]\d*\.\d+\.-?\d+\.-?\d+$/;

# Checks an answer: its HTTP status, "allowed", and each check's fields
# (those given); a time in ms may be up to 10 s less than the one given
# (-1 and null are exact). A check that was charged (a call that passed,
# a check PASSED or DELAYED) has a "reservation" too, and no other does;
# "reserved => N" checks that it reserves N units.
sub answer_is {
    my ($name, $res, $json, $status, $allowed, @checks) = @_;
    Test::More::is($res->{status}, $status, "$name: status $status");
    Test::More::is(header($res, 'Content-Type'), 'application/json',
                   "$name: Content-Type");
    return unless $json;
    Test::More::is(join(',', sort keys %$json), 'allowed,checks',
                   "$name: its fields");
    Test::More::ok(JSON::PP::is_bool($json->{allowed}),
                   "$name: allowed is a boolean");
    Test::More::is($json->{allowed} ? 1 : 0, $allowed,
                   "$name: allowed is $allowed");
    Test::More::is(scalar @{ $json->{checks} }, scalar @checks,
                   "$name: its checks");
    for my $i (0 .. $#checks) {
        my ($got, $want) = ($json->{checks}[$i] // {}, $checks[$i]);
        my %want = %$want;
        my $reserved = delete $want{reserved};
        Test::More::is(join(' ', grep { $_ ne 'reservation' } sort keys %$got),
                       "@FIELDS", "$name: check $i: its fields");
        my $charged = $json->{allowed}
            && ($got->{status} // '') =~ /^(PASSED|DELAYED)/;
        if (defined $got->{reservation}) {
            Test::More::like($got->{reservation}, $RESERVATION,
                             "$name: check $i: a reservation");
            Test::More::ok($charged, "$name: check $i: charged, so reserved");
        }
        if (defined $reserved) {
            Test::More::is((reservation_of($got) // [0])->[0], $reserved,
                           "$name: check $i: $reserved units reserved");
        }
        check_fields("$name: check $i", $got, \%want);
    }
}

# A check's reservation as its fields: [cost, at, token, token], or undef.
sub reservation_of {
    my ($check) = @_;
    my $text = $check->{reservation} // return;
    return [ (split /\./, $text)[1 .. 4] ];
}

# Checks a settle call's answer: 200, "settled" true, and each check's
# zone, key and "charged" units (negative: given back), in the caller's
# order.
sub settled_is {
    my ($name, $res, $json, @checks) = @_;
    json_200_is("$name: settled", $res, $json, {
        settled => JSON::PP::true,
        checks => [ map { { %$_, status => 'SETTLED' } } @checks ] });
}

sub check_fields {
    my ($name, $got, $want) = @_;
    for my $f (sort keys %$want) {
        if ($f =~ /_ms$/ && defined $want->{$f} && $want->{$f} > 0) {
            Test::More::ok(defined $got->{$f} && $got->{$f} <= $want->{$f}
                           && $got->{$f} > $want->{$f} - 10_000,
                           "$name: $f within 10 s under $want->{$f}")
                or Test::More::diag('got ' . ($got->{$f} // 'null'));
        } else {
            Test::More::is($got->{$f}, $want->{$f}, "$name: $f");
        }
    }
}

# An error answer: the status, and the body exactly {"error":MESSAGE}.
sub error_is {
    my ($name, $res, $status, $message) = @_;
    Test::More::is($res->{status}, $status, "$name: status $status");
    my $json = json_of($name, $res) or return;
    Test::More::is_deeply($json, { error => $message },
                          "$name: {\"error\":\"$message\"}");
}

# ---------------------------------------------------------------------------
# One funnel

# One call of cost $cost for key $key by way $way: an HTTP request (its
# location charges X-Cost), a GET, a POST of one check, or a POST of two
# checks whose second zone, "wide", never refuses. Returns whether it
# passed and the units left, as the client sees them.
sub funnel_call {
    my ($way, $key, $cost) = @_;
    if ($way eq 'http') {
        my $res = request('GET /a.txt', 'X-User-Id' => $key, 'X-Cost' => $cost);
        my ($left) = (header($res, 'RateLimit') // '') =~ /;r=(\d+);/;
        return ($res->{status} == 200 ? 1 : 0, $left, $res);
    }
    my $res = $way eq 'get'
        ? request("GET /throttle?zone=reply&key=$key&cost=$cost")
        : request('POST /throttle', 'Content-Type' => 'application/json',
                  \JSON::PP->new->canonical->encode({ checks => [
                      { zone => 'reply', key => $key, cost => $cost },
                      $way eq 'multi'
                          ? { zone => 'wide', key => $key, cost => $cost }
                          : () ] }));
    my $json = eval { JSON::PP->new->utf8->decode($res->{body}) } or return;
    return ($json->{allowed} ? 1 : 0, $json->{checks}[0]{remaining}, $res);
}

# Calls of random cost (0 to 3) for one key, by every way at random, each
# answer compared with a model of the zone's funnel: the zone refills a
# unit an hour, so within the test a call of cost c passes if and only if
# c units are left, and takes them; a refused call takes none. In a
# location with "throttle zone=reply cost=$http_x_cost;" at / and
# "throttle_api zones=reply,wide;" at /throttle, reply keyed on
# $http_x_user_id with rate=1r/h and burst=$limit-1.
sub one_funnel {
    my ($name, $key, $limit, $calls) = @_;
    my $seed = $ENV{TEST_THROTTLE_SEED} // int rand 1e9;
    srand $seed;
    my ($left, @log, %seen) = ($limit);
    my $wrong = 0;
    for my $i (1 .. $calls) {
        my $way = (qw(http get post multi))[rand 4];
        my $cost = int rand 4;
        my $pass = $cost <= $left ? 1 : 0;
        $left -= $cost if $pass;
        my ($got_pass, $got_left, $res) = funnel_call($way, $key, $cost);
        my $ok = defined $got_pass && $got_pass == $pass
            && defined $got_left && $got_left == $left;
        $wrong++ unless $ok;
        $seen{"$way " . ($pass ? 'passes' : 'refused')}++;
        push @log, sprintf('%3d %-5s cost %d: %s, %d left; got %s %s%s',
                           $i, $way, $cost, $pass ? 'passes' : 'refused',
                           $left, $got_pass // '?', $got_left // '?',
                           $ok ? '' : '   <-- ' . ($res->{status} // 'error'));
    }
    Test::More::is($wrong, 0, "$name: $calls random calls decided as one "
                              . "funnel of $limit (TEST_THROTTLE_SEED=$seed)")
        or Test::More::diag(join "\n", @log);
    Test::More::ok(grep({ /passes/ } keys %seen) >= 3
                   && grep({ /refused/ } keys %seen) >= 3,
                   "$name: most ways both passed and were refused")
        or Test::More::diag(join ', ', map { "$_: $seen{$_}" } sort keys %seen);
}

1;
