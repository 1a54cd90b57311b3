# SPDX-License-Identifier: BSD-2-Clause
# Flooded zones at the edges of single flights and of the table
# (docs/modes.md, "A flooded key"; docs/architecture.md, "A zone's
# table"), with a real nginx (2 workers) and a real redis-server:
#
# 1. A reload that makes a local zone strict (same name and size) gives it
#    flights: a key flooded after it by wrk (32 connections, 3 s) is
#    admitted exactly (within one funnel's floor and ceiling over the span
#    of its admissions, as t/redis_flood.t), by Redis or the zone only,
#    requests wait for the key's flight, and Redis runs at most 4 scripts
#    per admitted request (t/redis_flood.t's bound, there with two nginx;
#    here about 1.4, and 24 when the reload leaves the zone no flights).
# 2. A strict zone of 64k has the fewest flights, 16 entries (under 128k:
#    throttle::flight_entries()): 48 keys flooded at once (96 connections,
#    4 s) take them from each other, and still every key is admitted
#    exactly, no request waits as long as Redis's timeout (1 s), and none
#    is answered by throttle_on_error or a 5xx.
# 3. burst=0, a fresh key, 64 requests at once while Redis holds the
#    first one's script for 150 ms (CLIENT PAUSE WRITE): one admitted, 63
#    refused (429 REJECTED: none by throttle_on_error, no 5xx), none as
#    long as the timeout (500 ms); the 63 wait for the first's flight and
#    are refused from its answer, with at most 2 scripts a round (a fresh
#    key's memory shows no room beyond its first request).
# 4. An async zone of 2m (about 60,000 keys) flooded by 200,000 distinct
#    keys (FLOOD_KEYS) at full speed, faster than its records can keep
#    them between two syncs, while a hot key (1r/h burst=4) whose 5 units
#    reached Redis before is tried every 20 ms: it passes no more (it is
#    never evicted: keys held + evicted = keys sent), every flood key's
#    unit reaches Redis or is counted lost
#    (nginx_throttle_sync_lost_units_total), and Redis holds the hot
#    key's 5 units after.
# 5. The same, the hot key charged as the flood starts: every unit
#    admitted (the flood's and the hot key's) reaches Redis or is counted
#    lost, and the key is limited after; it passes burst + 1 times, no
#    more: a limited key still tried is the last to go (a lookup moves its
#    record to the back of the queue that makes room).
#
# The figures (requests, admitted, scripts, waits, slowest request, keys
# a second) are printed as diags. Every block also checks error.log for
# crashes, [alert] and [crit].

use strict;
use warnings;

use Test::More;
use Flood qw(wrk_path start_wrk finish_wrk wrk_figures funnel_bounds);
use Processes qw(read_file);
use Time::HiRes ();
use RedisChecks ();
use ThrottleTest;

require_redis_module();
plan skip_all => 'wrk is not installed' unless wrk_path();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# The flood's access log (log_format edges, @flood_log) from $since (a
# time()) on, per key: { at => [when each admission ended], seen => {
# "status $throttle_status" => n }, slowest => the longest $request_time }.
sub flood_log {
    my ($nginx, $since) = @_;
    my %by;
    for (split /\n/, read_file("$nginx->{prefix}/logs/flood.log")) {
        my ($key, $at, $took, $status, $verdict) = split / /;
        next if $at < ($since // 0);
        my $k = $by{$key} //= { at => [], seen => {}, slowest => 0 };
        push @{ $k->{at} }, $at if $status eq '200' && $verdict eq 'PASSED';
        $k->{seen}{"$status $verdict"}++;
        $k->{slowest} = $took if $took > $k->{slowest};
    }
    return \%by;
}

# '' if the key's admissions are what one exact funnel admits over their
# span, else why not.
sub inexact {
    my ($key, $k, $rate, $burst) = @_;
    my ($floor, $ceiling, $span) = funnel_bounds($rate, $burst, $k->{at});
    my $n = @{ $k->{at} };
    return '' if $n >= $floor && $n <= $ceiling;
    return sprintf '%s: %d admitted, one funnel %d..%d over %.3f s',
                   $key, $n, $floor, $ceiling, $span;
}

# The answers of the key that were neither Redis's or the zone's 200 nor
# their 429 (throttle_on_error, a 5xx...), as "status verdict xN".
sub odd_answers {
    my ($k) = @_;
    my $seen = $k->{seen};
    return join ', ', map { "$_ x$seen->{$_}" }
                      grep { !/^(200 PASSED|429 REJECTED)$/ } sort keys %$seen;
}

sub metric {
    my ($m, $name, $zone, $state) = @_;
    my $labels = "zone=\"$zone\"" . (defined $state ? ",state=\"$state\"" : '');
    return $m->{"$name\{$labels\}"} // 0;
}

# Test 1: one key flooded by wrk for 3 s (32 connections): exact, and few
# scripts per admitted request.
sub flood_one_key {
    my ($name, $nginx, $redis, $rate, $burst) = @_;
    my $step = \&ThrottleTest::Step::request;
    # the script loaded (no NOSCRIPT in the count)
    $step->('GET /a.txt', 'X-Key' => 'warm');
    my $scripts = $redis->script_calls;
    my $waits = metric(ThrottleTest::Step::metrics(),
                       'nginx_throttle_flight_waits_total', 'z');
    my $since = Time::HiRes::time();
    my @out = finish_wrk(start_wrk(
        url => "http://127.0.0.1:$nginx->{port}/a.txt", connections => 32,
        seconds => 3, headers => ['X-Key: flood']));
    $scripts = $redis->script_calls - $scripts;
    $waits = metric(ThrottleTest::Step::metrics(),
                    'nginx_throttle_flight_waits_total', 'z') - $waits;
    my $fig = wrk_figures(@out);
    ok($fig->{requests} > 1000, "$name: the flood ran ($fig->{requests} requests)")
        or diag(join "\n", @out);
    is($fig->{errors}, 0, "$name: no socket errors") or diag(join "\n", @out);
    my $k = flood_log($nginx, $since)->{flood} // { at => [], seen => {}, slowest => 0 };
    my $admitted = @{ $k->{at} };
    my ($floor, $ceiling, $span) = funnel_bounds($rate, $burst, $k->{at});
    is(inexact('flood', $k, $rate, $burst), '',
       "$name: admitted exactly what one funnel admits over the span");
    is(odd_answers($k), '', "$name: every answer is Redis's or the zone's");
    cmp_ok($k->{slowest}, '<', 1, "$name: no request took the timeout (1 s)");
    cmp_ok($waits, '>', 0, "$name: requests waited for the key's flight");
    my $per = $admitted ? $scripts / $admitted : 0;
    diag(sprintf '%s: %d requests, %d admitted (one funnel %d..%d over '
         . '%.3f s), %d scripts, %.2f per admitted, %d flight waits, '
         . 'slowest %.3f s', $name, $fig->{requests}, $admitted, $floor,
         $ceiling, $span, $scripts, $per, $waits, $k->{slowest});
    cmp_ok($per, '<=', 4, "$name: at most 4 scripts per admitted request");
}

# Tests 4 and 5: FLOOD_KEYS (200,000) distinct keys by two pipelined
# clients, while $hot is tried every 20 ms; { keys, took, asked (the hot
# key's requests), hot => { status => n }, admitted_at => [seconds into
# the flood of each 200] }.
sub async_flood {
    my ($name, $nginx, $hot) = @_;
    my $keys = $ENV{FLOOD_KEYS} || 200_000;
    my $t0 = Time::HiRes::time();
    my $flood = Flood::fork_pipelined($nginx->{port}, "$nginx->{prefix}/flood.out",
                                      int($keys / 2), 'f0-', 'f1-');
    my %f = (keys => 2 * int($keys / 2), asked => 0, hot => {}, admitted_at => []);
    while (Flood::running($flood)) {
        my $status = ThrottleTest::Step::request('GET /a.txt', 'X-Key' => $hot)
            ->{status} // 'none';
        $f{hot}{$status}++;
        $f{asked}++;
        push @{ $f{admitted_at} }, Time::HiRes::time() - $t0 if $status eq '200';
        Time::HiRes::sleep(0.02);
    }
    my $counts = Flood::counts($flood);
    $f{took} = Time::HiRes::time() - $t0;
    diag(sprintf '%s: %d keys in %.1f s (%.0f/s), the hot key asked %d times',
                 $name, $f{keys}, $f{took}, $f{keys} / $f{took}, $f{asked});
    is_deeply($counts, { 200 => $f{keys} }, "$name: every distinct key passes, once");
    cmp_ok($f{asked}, '>=', 20, "$name: the hot key asked throughout");
    return \%f;
}

# An async zone's figures: evictions (live, drained), keys held, units
# lost and pending.
sub async_figures {
    my ($m) = @_;
    return {
        live    => metric($m, 'nginx_throttle_zone_evictions_total', 'z', 'live'),
        drained => metric($m, 'nginx_throttle_zone_evictions_total', 'z', 'drained'),
        held    => metric($m, 'nginx_throttle_zone_keys', 'z'),
        lost    => metric($m, 'nginx_throttle_sync_lost_units_total', 'z'),
        pending => metric($m, 'nginx_throttle_sync_pending_units', 'z'),
    };
}

# The keys in Redis once the zone has sent every unit and the last round
# is answered.
sub synced {
    my ($name, $redis) = @_;
    ok(Processes::wait_until(10, sub {
           async_figures(ThrottleTest::Step::metrics())->{pending} == 0 }),
       "$name: no units left to send");
    Time::HiRes::sleep(0.5);
    return $redis->cmd('DBSIZE');
}

# How many units of zone z (1r/h) an async key holds in Redis (its TAT
# ahead of Redis's clock, in hours, rounded: the units date from less than
# half an hour ago); undef when Redis has no such key.
sub units_in {
    my ($redis, $key) = @_;
    my $tat = $redis->cmd('GET', RedisChecks::async_key('z', $key));
    return undef unless defined $tat;
    return int(($tat - $redis->time_us) / 3.6e9 + 0.5);
}

run_blocks();

__DATA__

The wrk floods (tests 1 and 2) are logged, a line a request, to
logs/flood.log; their rejections are not (throttle_log_level info under
error_log warn). Tests 4 and 5 share their async zone.

--- @flood_log
error_log $TEST_NGINX_PREFIX/logs/error.log warn;
log_format edges '$http_x_key $msec $request_time $status $throttle_status';

--- @flood_location
location = /a.txt {
    throttle zone=z;
    throttle_log_level info;
    access_log $TEST_NGINX_PREFIX/logs/flood.log edges;
}
location = /metrics {
    throttle_metrics;
}

--- @async_zone
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:2m rate=1r/h burst=4 redis=main sync=async sync_interval=100ms;

--- @async_location
keepalive_requests 10000000;
location = /a.txt {
    throttle zone=z;
}
location = /metrics {
    throttle_metrics;
}



=== TEST 1: a reload that makes a local zone strict gives it flights: a key flooded after it is admitted exactly, with few scripts per admission
--- redis
redis
--- http_config
throttle_zone $http_x_key zone=z:1m rate=50r/s burst=10;
@flood_log
--- config
@flood_location
--- requests
GET /a.txt x3 => 200
  > X-Key: flood
perl {
    is($redis->script_calls, 0, "$name: local: no script reached Redis");
}
--- reload_http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:1m rate=50r/s burst=10 redis=main;
@flood_log
--- requests_after_reload
perl {
    main::flood_one_key($name, $nginx, $redis, 50, 10);
}
--- no_error_log
has no room left for its keys' flights



=== TEST 2: 48 keys flooded at once share the 16 flights of a 64k zone: every key is admitted exactly, none waits as long as the timeout
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;
throttle_zone $http_x_key zone=z:64k rate=10r/s burst=5 redis=main;
@flood_log
--- config
@flood_location
--- requests
perl {
    my @keys = map { "k$_" } 0 .. 47;
    request('GET /a.txt', 'X-Key' => 'warm');
    my $scripts = $redis->script_calls;
    my @out = Flood::finish_wrk(Flood::start_wrk(
        url => "http://127.0.0.1:$nginx->{port}/a.txt", connections => 96,
        seconds => 4, keys => \@keys, dir => $nginx->{prefix}));
    $scripts = $redis->script_calls - $scripts;
    my $fig = Flood::wrk_figures(@out);
    ok($fig->{requests} > 1000, "$name: the flood ran ($fig->{requests} requests)")
        or diag(join "\n", @out);
    is($fig->{errors}, 0, "$name: no socket errors") or diag(join "\n", @out);
    my $log = main::flood_log($nginx);
    my $none = { at => [], seen => {}, slowest => 0 };
    my @inexact = grep { $_ } map { main::inexact($_, $log->{$_} // $none, 10, 5) }
                  @keys;
    is(join("\n", @inexact), '',
       "$name: each of the 48 keys admitted exactly what one funnel admits");
    my @odd = grep { $_ } map {
        my $o = main::odd_answers($log->{$_} // $none);
        $o && "$_: $o" } @keys;
    is(join("\n", @odd), '', "$name: every answer is Redis's or the zone's");
    my ($slowest) = sort { $b <=> $a } map { ($log->{$_} // $none)->{slowest} } @keys;
    cmp_ok($slowest, '<', 1, "$name: no request took the timeout (1 s)");
    my @n = sort { $a <=> $b } map { scalar @{ ($log->{$_} // $none)->{at} } } @keys;
    my $admitted = 0;
    $admitted += $_ for @n;
    my $waits = main::metric(metrics(), 'nginx_throttle_flight_waits_total', 'z');
    diag(sprintf '%s: %d requests, %d admitted (%d to %d a key), %d scripts, '
         . '%.2f per admitted, %d flight waits, slowest %.3f s', $name,
         $fig->{requests}, $admitted, $n[0], $n[-1], $scripts,
         $admitted ? $scripts / $admitted : 0, $waits, $slowest);
}



=== TEST 3: burst=0, a fresh key, 64 requests at once while its script is held in Redis: one admitted, the others wait for its answer and are refused
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=500ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location = /a.txt {
    throttle zone=z;
    throttle_log_level info;
    add_header X-Status $throttle_status always;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt => 200
  > X-Key: warm
perl {
    for my $round (1 .. 2) {
        my $scripts = $redis->script_calls;
        my $waits = main::metric(metrics(), 'nginx_throttle_flight_waits_total', 'z');
        # the first script waits 150 ms in Redis: the others arrive while it
        # is in flight, as a flood's would
        $redis->cmd('CLIENT', 'PAUSE', 150, 'WRITE');
        my @res = parallel_requests(64, 'GET /a.txt', 'X-Key' => "fresh-$round");
        $scripts = $redis->script_calls - $scripts;
        $waits = main::metric(metrics(), 'nginx_throttle_flight_waits_total', 'z')
               - $waits;
        my %seen;
        $seen{ ($_->{status} // $_->{error}) . ' ' . (header($_, 'X-Status') // '-') }++
            for @res;
        is(join(', ', map { "$_ x$seen{$_}" } sort keys %seen),
           '200 PASSED x1, 429 REJECTED x63',
           "$name: round $round: one admitted, 63 refused by Redis or the zone");
        my ($slowest) = sort { $b <=> $a } map { $_->{elapsed} } @res;
        cmp_ok($slowest, '<', 0.5,
               "$name: round $round: no request took the timeout (500 ms)");
        diag(sprintf '%s: round %d: %d scripts, %d flight waits, slowest %.0f ms',
                     $name, $round, $scripts, $waits, $slowest * 1000);
        cmp_ok($waits, '>=', 32, "$name: round $round: requests waited for "
               . "the first's flight (docs/modes.md, \"A flooded key\")");
        cmp_ok($scripts, '<=', 2, "$name: round $round: at most 2 scripts");
    }
}



=== TEST 4: 200,000 distinct keys into a 2m async zone at full speed: a hot key synced before is limited exactly throughout, never evicted; evictions and lost units counted
--- redis
redis
--- http_config
@async_zone
--- config
@async_location
--- requests
perl {
    my @hot = map { request('GET /a.txt', 'X-Key' => 'hot')->{status} } 1 .. 6;
    is("@hot", '200 200 200 200 200 429', "$name: the hot key: burst + 1 = 5 admitted");
    # its units in Redis, its syncs done
    ok(wait_until(5, sub { (main::units_in($redis, 'hot') // 0) == 5
                           && main::async_figures(metrics())->{pending} == 0 }),
       "$name: the hot key's 5 units reached Redis");
    sleep 0.3;
    my $f = main::async_flood($name, $nginx, 'hot');
    is($f->{hot}{200} // 0, 0, "$name: the hot key passes no more during the flood");
    is($f->{hot}{429}, $f->{asked}, "$name: and is refused every time");
    my $m = main::async_figures(metrics());
    cmp_ok($m->{live}, '>', $f->{keys} / 2, "$name: $m->{live} live keys evicted");
    cmp_ok($m->{held}, '>=', 50_000, "$name: a full 2m async zone holds $m->{held} keys");
    is($m->{held} + $m->{live} + $m->{drained}, $f->{keys} + 1,
       "$name: keys held + keys evicted = keys sent (the hot key never evicted)");
    # every flood key's unit reached Redis or is counted lost
    my $in_redis = main::synced($name, $redis);
    $m = main::async_figures(metrics());
    diag("$name: $m->{live} live and $m->{drained} drained keys evicted, "
         . "$m->{held} held, $m->{lost} units lost, $in_redis keys in Redis");
    is($in_redis + $m->{lost}, $f->{keys} + 1,
       "$name: keys in Redis + units lost = keys sent + the hot key");
    is(main::units_in($redis, 'hot'), 5, "$name: Redis holds the hot key's 5 units");
}
--- error_log
throttle zone "z" is full



=== TEST 5: the same flood, a hot key charged as it starts: every unit admitted reaches Redis or is counted lost; the key stays limited
--- redis
redis
--- http_config
@async_zone
--- config
@async_location
--- requests
perl {
    my $f = main::async_flood($name, $nginx, 'late');
    my $admitted = $f->{hot}{200} // 0;
    is(request('GET /a.txt', 'X-Key' => 'late')->{status}, 429,
       "$name: the hot key is limited after the flood");
    my $in_redis = main::synced($name, $redis);
    my $m = main::async_figures(metrics());
    my $late = main::units_in($redis, 'late');
    # the flood keys' in Redis: all but the hot key, if it is there
    my $flood_in_redis = $in_redis - (defined $late ? 1 : 0);
    $late //= 0;
    diag("$name: the hot key admitted $admitted times, at "
         . join(' ', map { sprintf '%.2f', $_ } @{ $f->{admitted_at} })
         . " s; $late of its units in Redis; $m->{live} live keys evicted, "
         . "$m->{held} held, $m->{lost} units lost, $in_redis keys in Redis");
    is($f->{keys} + $admitted, $flood_in_redis + $late + $m->{lost},
       "$name: units admitted = units in Redis + units counted lost");
    is($admitted, 5, "$name: the hot key passes burst + 1 = 5 times, no more");
    is($m->{held} + $m->{live} + $m->{drained}, $f->{keys} + 1,
       "$name: keys held + keys evicted = keys sent (the hot key never evicted)");
}
--- error_log
throttle zone "z" is full
