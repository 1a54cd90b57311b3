# SPDX-License-Identifier: BSD-2-Clause
# concurrent=, strict zones (redis=): the places of a key are a sorted set
# in Redis, one member per request in flight, scored by when its lease
# ends. Two nginx (2 workers each) on one redis-server, in front of a slow
# backend the test starts (t/lib/SlowBackend.pm), which counts the
# requests of each key it holds at once:
#  - the places are shared by both nginx: 2 held on one and 1 on the
#    other, the 4th is refused on either; each nginx's gauge counts its
#    own; Redis empties as they end;
#  - a client gone and an upstream error (502) give their places back to
#    Redis; a request a rate zone (strict or local) refuses keeps none;
#  - a flood of 64 connections on one key for 3 s through both nginx,
#    against answers of 50 ms: the backend never holds more than 3 of
#    them, and Redis holds no place afterwards;
#  - a request longer than its lease (lease=2s, 5 s) keeps its place in
#    Redis: its member's score moves on, the 4th stays refused;
#  - SIGKILL of one whole nginx holding 3 places: the other gets 429
#    until 3/4 of a lease after the kill and gets in by a lease (and a
#    second of margin).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(time sleep);

use ConcurrentChecks qw(held_n refused_ok admitted_ok release_all
                        three_free_ok);
use InFlight qw(hold finish probe flood);
use Processes qw($TIMEOUT wait_until children_of wait_gone);
use Prometheus ();
use RedisServer;
use Responses qw(hdr status_of fmt_counts);
use SlowBackend;
use ThrottleTest;

require_redis_module();

my $redis = RedisServer->start;
my $port = $redis->port;
my $backend = SlowBackend->start;
my $bport = $backend->port;
ConcurrentChecks::backend($backend);

my $LEASE = 2;    # seconds, zone "short"

my %conf = (
    http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=1s;
throttle_zone \$http_x_key zone=streams:1m concurrent=3 redis=main;
throttle_zone \$http_x_key zone=short:1m concurrent=3 lease=${LEASE}s redis=main;
throttle_zone \$http_x_key zone=rate_strict:1m rate=1r/m burst=1 redis=main;
throttle_zone \$http_x_key zone=rate_local:1m rate=1r/m burst=1;
HTTP
    config => <<"SERVER",
location /slow {
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
    add_header X-Status \$throttle_status always;
    add_header X-Limit \$throttle_limit always;
    add_header X-Remaining \$throttle_remaining always;
}
location /short {
    throttle zone=short;
    proxy_pass http://127.0.0.1:$bport;
    add_header X-Status \$throttle_status always;
    add_header X-Limit \$throttle_limit always;
    add_header X-Remaining \$throttle_remaining always;
}
location /both_strict {
    throttle zone=rate_strict;
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
    add_header X-Status \$throttle_status always;
}
location /both_local {
    throttle zone=rate_local;
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
    add_header X-Status \$throttle_status always;
}
location = /metrics {
    throttle_metrics;
}
SERVER
);

my @nodes = map { start_instance(%conf) } 1 .. 2;
my ($A, $B) = @nodes;

# ---------------------------------------------------------------------------
# Helpers

sub zone_of { $_[0] =~ m{^/short} ? 'short' : 'streams' }

# Runs a case; a die is a failed test, and its keys' held requests are
# let go.
sub case {
    my ($name, $keys, $code) = @_;
    my $ok = eval { $code->($name); 1 };
    unless ($ok) {
        fail("$name: ran to the end");
        diag($@);
    }
    for my $key (@$keys) {
        eval { $backend->release($key); $backend->wait_current($key, 0) };
    }
}

# The Redis key of $key's places (its name has "{<key>}", and it is a
# sorted set: a rate zone's key of the same name is not), or undef if
# there is none.
sub redis_key {
    my ($key) = @_;
    my @names = grep { $redis->cmd('TYPE', $_) eq 'zset' }
                grep { /\{\Q$key\E\}/ } $redis->keys_matching('*');
    die "more than one Redis key for $key: @names\n" if @names > 1;
    return $names[0];
}

# How many places Redis holds for $key (members of its sorted set; 0
# when there is no key).
sub places {
    my ($key) = @_;
    my $name = redis_key($key) // return 0;
    return $redis->cmd('ZCARD', $name);
}

# The scores of $key's members, in microseconds, lowest first.
sub scores {
    my ($key) = @_;
    my $name = redis_key($key) // return ();
    my $r = $redis->cmd('ZRANGE', $name, 0, -1, 'WITHSCORES');
    my @pairs = ref $r ? @$r : ();
    return sort { $a <=> $b } map { $pairs[2 * $_ + 1] } 0 .. $#pairs / 2;
}

sub gauge {
    my ($env, $zone) = @_;
    my $m = Prometheus::parse(http_request($env, 'GET /metrics')->{body} // '');
    return $m->{"nginx_throttle_in_flight{zone=\"$zone\"}"};
}

# ---------------------------------------------------------------------------
# Cases

case('strict, one key on two nginx', ['sara', 'sam'], sub {
    my ($name) = @_;
    my @socks = held_n("$name: A", $A, 2, 'sara', '/slow?hold=1');
    push @socks, held_n("$name: B", $B, 1, 'sara', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 2 in flight through A, 1 through B");
    is(places('sara'), 3, "$name: Redis holds 3 places");
    my $rkey = redis_key('sara') // '';
    like($rkey, qr/^throttle:.*\{sara\}$/,
         "$name: the key has the prefix and the key in its hash tag");
    is($redis->cmd('TYPE', $rkey), 'zset', "$name: $rkey is a sorted set");
    my $pttl = $redis->cmd('PTTL', $rkey);
    ok($pttl > 0 && $pttl <= 60_000,
       "$name: it expires within a lease (PTTL $pttl ms)");
    my $now = $redis->time_us;
    my @scores = scores('sara');
    ok(@scores == 3 && $scores[0] > $now && $scores[-1] <= $now + 60e6 + 1e5,
       "$name: its scores are lease ends, at most 60 s from Redis's now")
        or diag("now $now, scores @scores");
    is(gauge($A, 'streams'), 2, "$name: A's nginx_throttle_in_flight is 2");
    is(gauge($B, 'streams'), 1, "$name: B's nginx_throttle_in_flight is 1");
    refused_ok("$name: A's 4th", $A, 'sara', '/slow?hold=1', 'streams');
    refused_ok("$name: B's 4th", $B, 'sara', '/slow?hold=1', 'streams');
    is(places('sara'), 3, "$name: the refusals took no place");
    admitted_ok("$name: another key meanwhile",
                probe($B, 'sam', '/slow?ms=0'), 2, 'streams');

    my @res = release_all('sara', @socks);
    admitted_ok("$name: A's 1st", $res[0], 2, 'streams');
    admitted_ok("$name: A's 2nd", $res[1], 1, 'streams');
    admitted_ok("$name: B's", $res[2], 0, 'streams');
    ok(wait_until(2, sub { places('sara') == 0 }),
       "$name: once they ended, Redis holds no place");
    ok(wait_until(2, sub {
        (gauge($A, 'streams') // -1) == 0 && (gauge($B, 'streams') // -1) == 0
    }), "$name: both gauges are back to 0");
    three_free_ok("$name: B", $B, 'sara', '/slow?hold=1', 'streams');
    is($backend->stats('sara')->{max}, 3, "$name: never more than 3 in flight");
});

case('strict, a client gone and an upstream error free their places',
     ['kim'], sub {
    my ($name) = @_;
    my @socks = held_n($name, $A, 2, 'kim', '/slow?hold=1');
    is(scalar @socks, 2, "$name: 2 in flight through A");
    my $bad = probe($B, 'kim', '/slow?fail=1&ms=100');
    is(status_of($bad), 502, "$name: a 3rd, through B, gets 502");
    ok(wait_until(2, sub { places('kim') == 2 }),
       "$name: Redis holds 2 places after the 502")
        or diag('ZCARD: ' . places('kim'));
    close shift @socks;
    ok($backend->wait_current('kim', 1), "$name: A gave up the request "
                                         . 'whose client left');
    ok(wait_until(2, sub { places('kim') == 1 }),
       "$name: Redis holds 1 place after the client left")
        or diag('ZCARD: ' . places('kim'));
    push @socks, held_n("$name: B", $B, 2, 'kim', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 2 more take the 2 places, through B");
    refused_ok("$name: the 4th", $A, 'kim', '/slow?hold=1', 'streams');
    release_all('kim', @socks);
    ok(wait_until(2, sub { places('kim') == 0 }),
       "$name: then Redis holds no place");
});

# rate_strict, rate_local: 2 requests a minute; streams: 3 at once
for my $rate (qw(strict local)) {
    my $key = "rate-$rate";
    case("strict, a $rate rate zone refusing takes no place", [$key], sub {
        my ($name) = @_;
        my @socks = held_n($name, $A, 2, $key, "/both_$rate?hold=1");
        is(scalar @socks, 2, "$name: 2 admitted by both zones");
        my ($sock, $res) = hold($A, $backend, $key, "/both_$rate?hold=1");
        push @socks, $sock if $sock;
        is(status_of($res // {}), 429, "$name: the 3rd is refused");
        like(hdr($res // {}, 'RateLimit') // '', qr/^"rate_$rate";r=0;t=\d+$/,
             "$name: ... by the rate zone");
        ok(wait_until(1, sub { places($key) == 2 }) && places($key) == 2,
           "$name: Redis holds the 2 places of the admitted ones, no more")
            or diag('ZCARD: ' . places($key));
        my ($third) = held_n("$name: /slow", $B, 1, $key, '/slow?hold=1');
        push @socks, $third if $third;
        ok($third, "$name: the place the refused one did not keep is free");
        refused_ok("$name: the 4th in flight", $B, $key, '/slow?hold=1',
                   'streams');
        release_all($key, @socks);
        ok(wait_until(2, sub { places($key) == 0 }),
           "$name: then Redis holds no place");
    });
}

case('strict, a flood of 64 connections on one key', ['flood'], sub {
    my ($name) = @_;
    my $f = flood(\@nodes, connections => 64, seconds => 3, key => 'flood',
                  uri => '/slow?ms=50');
    my $s = $backend->stats('flood');
    my $took = sprintf '%.1f s', $f->{took};
    is($s->{max}, 3, "$name: the backend had 3 at most at once "
                     . "($s->{total} requests in $took)");
    is(join(' ', grep { !/^(200|429)$/ } sort keys %{ $f->{status} }), '',
       "$name: every answer is a 200 or a 429 (" . fmt_counts($f->{status})
       . ')');
    is(join(' ', grep { !/^(PASSED|REJECTED)$/ } sort keys %{ $f->{x_status} }),
       '', "$name: every \$throttle_status is PASSED or REJECTED ("
       . fmt_counts($f->{x_status}) . ')');
    ok(($f->{by_node}[0]{200} // 0) > 0 && ($f->{by_node}[1]{200} // 0) > 0,
       "$name: both nginx admitted some");
    ok(($f->{status}{429} // 0) > 0, "$name: and refused some");
    is($s->{total}, $f->{status}{200} // 0,
       "$name: the backend saw exactly the requests admitted");
    ok($backend->wait_current('flood', 0), "$name: all have ended");
    ok(wait_until(2, sub { places('flood') == 0 }),
       "$name: Redis holds no place afterwards")
        or diag('ZCARD: ' . places('flood'));
});

case('strict, a request longer than its lease keeps its place', ['rita'],
     sub {
    my ($name) = @_;
    my @socks = held_n($name, $A, 3, 'rita', '/short?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight through A (lease=${LEASE}s)");
    my @first = scores('rita');
    my $t0 = time;
    my (@counts, @late);
    while (time - $t0 < 2.5 * $LEASE) {
        push @counts, places('rita');
        my $now = $redis->time_us;
        # a lease ends from 3/4 lease to a lease after its last renewal
        push @late, map { sprintf '%.2f', ($_ - $now) / 1e6 }
                    grep { $_ - $now < 0.75 * $LEASE * 1e6 - 0.4e6 } scores('rita');
        sleep 0.25;
    }
    is(join(' ', grep { $_ != 3 } @counts), '',
       "$name: Redis held 3 places all along " . 2.5 * $LEASE . ' s ('
       . @counts . ' looks)');
    is("@late", '', "$name: each lease was renewed in time: never less than "
                    . '3/4 lease (- 0.4 s) ahead');
    my @now = scores('rita');
    ok(@first && @now && $now[0] > $first[-1],
       "$name: every score moved past the first leases' ends")
        or diag("first @first, now @now");
    refused_ok("$name: B's 4th", $B, 'rita', '/short?hold=1', 'short');
    refused_ok("$name: A's 4th", $A, 'rita', '/short?hold=1', 'short');
    my @res = release_all('rita', @socks);
    is(join(' ', map { status_of($_) } @res), '200 200 200',
       "$name: they end with 200");
    ok(wait_until(2, sub { places('rita') == 0 }),
       "$name: then Redis holds no place");
});

case('strict, SIGKILL of the nginx holding the places', ['kyle'], sub {
    my ($name) = @_;
    my @socks = held_n($name, $A, 3, 'kyle', '/short?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight through A (lease=${LEASE}s)");
    refused_ok("$name: B's 4th before", $B, 'kyle', '/short?hold=1', 'short');

    my @procs = ($A->{master}, children_of($A->{master}));
    my $t0 = time;
    kill 'KILL', @procs;
    my $now = $redis->time_us;
    my @scores = scores('kyle');
    my @ahead = map { sprintf '%.2f', ($_ - $now) / 1e6 } @scores;
    ok(@scores == 3, "$name: Redis still holds the 3 places");
    is(join(' ', grep { $_ < 0.75 * $LEASE - 0.25 || $_ > $LEASE + 0.1 } @ahead),
       '', "$name: their leases end 3/4 lease to a lease after the kill "
           . "(@ahead s)");
    ok(wait_gone($TIMEOUT, @procs), "$name: A's master and workers are gone");
    close $_ for @socks;

    # B, every 100 ms, until a request is admitted
    my ($freed, @statuses);
    while (time - $t0 < 3 * $LEASE) {
        my $sent = time - $t0;
        my $res = probe($B, 'kyle', '/short?ms=0');
        push @statuses, status_of($res);
        if (status_of($res) eq '200') {
            $freed = $sent;
            last;
        }
        sleep 0.1;
    }
    my @odd = grep { $_ ne '429' && $_ ne '200' } @statuses;
    is("@odd", '', "$name: B got 429 until it got a 200");
    ok(defined $freed, "$name: B gets in in the end");
    $freed //= 99;
    my $shown = sprintf '%.2f s', $freed;
    cmp_ok($freed, '>=', 0.75 * $LEASE - 0.25,
           "$name: not before 3/4 lease ($shown after the kill)");
    cmp_ok($freed, '<=', $LEASE + 1,
           "$name: within a lease and a second ($shown after the kill)");
    ok(wait_until(2, sub { places('kyle') == 0 }),
       "$name: Redis holds no place then");
    three_free_ok("$name: B, after", $B, 'kyle', '/short?hold=1', 'short');
});

for my $i (0, 1) {
    my $log = stop_instance($nodes[$i]);
    my $which = $i ? 'B' : 'A (until the kill)';
    # A's master may have seen a worker die before it died itself
    $log =~ s/^.*\bworker process \d+ exited on signal 9\b.*\n//mg if $i == 0;
    unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
           "$which: no crash, alert or crit in error.log");
    unlike($log, qr/throttle redis/, "$which: no Redis errors logged");
}

$backend->stop;
$redis->stop;
done_testing();
