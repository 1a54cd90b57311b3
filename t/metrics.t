# SPDX-License-Identifier: BSD-2-Clause
# throttle_metrics: a known sequence of requests, then /metrics read and
# its samples checked, exactly where the sequence fixes them: requests and
# units per zone and outcome (dry run, errors, two zones in a location,
# both phases, delay=, nothing leaking into another zone), both workers' requests,
# a reload that keeps a zone, a full zone's evictions, a strict zone's
# denial cache and errors, an async zone's syncs with a real Redis and
# without one; GET and HEAD answered, other methods refused.
#
# Rates are slow (1r/m) unless a test needs keys to expire, so that the
# milliseconds a block takes never change an expected value.

use strict;
use warnings;

use Test::More;

use Prometheus;
use ThrottleTest;

require_redis_module();

# The version build_info reports: the module's define.
our $VERSION = module_version();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# One test per series: its value.
sub metrics_are {
    my ($name, $samples, $want) = @_;
    for my $series (sort keys %$want) {
        is($samples->{$series}, $want->{$series}, "$name: $series");
    }
}

# A zone's requests_total and units_total, every result of each checked:
# those not named must be 0.
sub counts_are {
    my ($name, $samples, $zone, %want) = @_;
    my %results = (
        requests => [qw(passed rejected rejected_dry_run error_allowed
                        error_denied delayed delayed_dry_run)],
        units    => [qw(passed rejected)],
    );
    for my $family (qw(requests units)) {
        metrics_are($name, $samples, {
            map {
                ("nginx_throttle_${family}_total{zone=\"$zone\",result=\"$_\"}"
                     => $want{$family}{$_} // 0)
            } @{ $results{$family} }
        });
    }
}

# The series of $samples whose name matches $re, sorted.
sub series_like {
    my ($samples, $re) = @_;
    return [sort grep { /$re/ } keys %$samples];
}

# Sends a request per key, X-Key $prefix<n> for n in 0 .. $count - 1; the
# statuses and how often each came.
sub one_each {
    my ($what, $prefix, $count) = @_;
    my %status;
    for my $n (0 .. $count - 1) {
        my $res = ThrottleTest::Step::request($what, 'X-Key' => "$prefix$n");
        $status{ $res->{status} // 'none' }++;
    }
    return \%status;
}

run_blocks();

__DATA__

=== TEST 1: 16 passed and 4 rejected in one zone: requests and units exactly; an empty key is not counted; no strict or async families
--- http_config
throttle_zone $http_x_key zone=reply:1m rate=30r/m burst=15;
--- config
location = /a.txt {
    throttle zone=reply;
}
location = /b.txt {
    throttle zone=reply cost=2;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x16 => 200
  > X-Key: alice
GET /b.txt x4 => 429
  > X-Key: alice
GET /a.txt x3 => 200
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'reply',
                     requests => { passed => 16, rejected => 4 },
                     units    => { passed => 16, rejected => 8 });
    main::metrics_are($name, $m, {
        "nginx_throttle_build_info{version=\"$main::VERSION\"}" => 1,
        'nginx_throttle_zone_keys{zone="reply"}' => 1,
        'nginx_throttle_zone_size_bytes{zone="reply"}' => 1048576,
        'nginx_throttle_zone_evictions_total{zone="reply",state="drained"}' => 0,
        'nginx_throttle_zone_evictions_total{zone="reply",state="live"}' => 0,
    });
    my $bytes = $m->{'nginx_throttle_zone_bytes{zone="reply"}'};
    ok($bytes > 0 && $bytes < 1048576 && $bytes % 4096 == 0,
       "$name: zone_bytes $bytes: whole pages, fewer than the zone's");
    is_deeply(main::series_like($m, qr/denial|sync/), [],
              "$name: a local zone has no strict or async samples");
}



=== TEST 2: GET and HEAD are answered in the text format; other methods get 405 with Allow
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m;
--- config
location = /metrics {
    throttle_metrics;
}
--- requests
GET /metrics => 200
  Content-Type: text/plain; version=0.0.4; charset=utf-8
  body ~ (?s)^# HELP nginx_throttle_build_info .*\n# TYPE nginx_throttle_build_info gauge\n
HEAD /metrics => 200
  Content-Type: text/plain; version=0.0.4; charset=utf-8
  body:
POST /metrics => 405
  Allow: GET, HEAD
PUT /metrics => 405
  Allow: GET, HEAD
DELETE /metrics => 405
  Allow: GET, HEAD
perl {
    my $get = request('GET /metrics');
    my $head = request('HEAD /metrics');
    is(header($head, 'Content-Length'), length $get->{body},
       "$name: HEAD says the length GET sends");
}



=== TEST 3: dry run: rejections counted as rejected_dry_run, their units refused
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=1;
--- config
location = /a.txt {
    throttle zone=z;
    throttle_dry_run on;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x5 => 200
  > X-Key: k
perl {
    main::counts_are($name, metrics(), 'z',
                     requests => { passed => 2, rejected_dry_run => 3 },
                     units    => { passed => 2, rejected => 3 });
}



=== TEST 4: two zones in a location count each request once in each, by their own verdict: a request zone a refuses is rejected in a and passed in b; only a counts its units refused; another zone's counters stay 0
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=1;
throttle_zone k zone=b:1m rate=1r/m burst=9;
throttle_zone k zone=unused:1m rate=1r/m burst=9;
--- config
location = /a.txt {
    throttle zone=a;
    throttle zone=b cost=2;
}
location = /b.txt {
    throttle zone=b;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt x3 => 429
GET /b.txt => 200
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'a',
                     requests => { passed => 2, rejected => 3 },
                     units    => { passed => 2, rejected => 3 });
    # b let all 6 through (the 3 that a refused too), and charged the 2
    # that went through on /a.txt (cost 2) and the one on /b.txt
    main::counts_are($name, $m, 'b',
                     requests => { passed => 6 },
                     units    => { passed => 5 });
    main::counts_are($name, $m, 'unused');
    main::metrics_are($name, $m, {
        'nginx_throttle_zone_keys{zone="a"}' => 1,
        'nginx_throttle_zone_keys{zone="b"}' => 1,
        'nginx_throttle_zone_keys{zone="unused"}' => 0,
    });
    # every family lists the zones in the order of their names
    my @zones = map { /zone="([^"]+)"/ } grep { /^nginx_throttle_zone_keys/ }
                split /\n/, request('GET /metrics')->{body};
    is("@zones", 'a b unused', "$name: zones sorted by name");
}



=== TEST 5: phase=authorized lines are counted; a request the preaccess zone rejects is not counted by the authorized one
--- http_config
throttle_zone k zone=pre:1m rate=1r/m burst=1;
throttle_zone k zone=post:1m rate=1r/m burst=9;
throttle_zone k zone=alone:1m rate=1r/m burst=0;
--- config
location = /a.txt {
    throttle zone=pre;
    throttle zone=post phase=authorized;
}
location = /b.txt {
    throttle zone=alone phase=authorized;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x2 => 200
GET /a.txt x2 => 429
GET /b.txt => 200
GET /b.txt x2 => 429
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'pre',
                     requests => { passed => 2, rejected => 2 },
                     units    => { passed => 2, rejected => 2 });
    main::counts_are($name, $m, 'post',
                     requests => { passed => 2 }, units => { passed => 2 });
    main::counts_are($name, $m, 'alone',
                     requests => { passed => 1, rejected => 2 },
                     units    => { passed => 1, rejected => 2 });
}



=== TEST 6: two workers: every request counted once, whichever worker served it, and either worker reports them all
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=99;
--- config
add_header X-Pid $pid always;
location = /a.txt {
    throttle zone=z;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x40 => 200
  > X-Key: k
perl {
    # scrapes until both workers answered one, each reporting the 40
    my %answered;
    for (1 .. 50) {
        my $res = request('GET /metrics');
        my $m = Prometheus::parse($res->{body});
        $answered{ header($res, 'X-Pid') } =
            $m->{'nginx_throttle_requests_total{zone="z",result="passed"}'};
        last if keys %answered >= 2;
    }
    cmp_ok(scalar keys %answered, '>=', 2, "$name: both workers scraped");
    is_deeply([values %answered], [(40) x keys %answered],
              "$name: each reports 40 passed")
        or diag(explain \%answered);
}
--- distinct
X-Pid >= 2



=== TEST 7: a reload keeps a kept zone's counters and keys; a resized zone starts afresh, a new one at 0, a removed one is gone
--- http_config
throttle_zone k zone=kept:1m rate=1r/m burst=9;
throttle_zone k zone=resized:1m rate=1r/m burst=9;
throttle_zone k zone=gone:1m rate=1r/m burst=9;
--- config
location = /a.txt {
    throttle zone=kept;
    throttle zone=resized;
    throttle zone=gone;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x3 => 200
perl {
    my $m = metrics();
    main::counts_are($name, $m, $_,
                     requests => { passed => 3 }, units => { passed => 3 })
        for qw(kept resized gone);
}
--- reload_http_config
throttle_zone k zone=kept:1m rate=1r/m burst=9;
throttle_zone k zone=resized:2m rate=1r/m burst=9;
throttle_zone k zone=fresh:1m rate=1r/m burst=9;
--- reload_config
location = /a.txt {
    throttle zone=kept;
    throttle zone=resized;
    throttle zone=fresh;
}
location = /metrics {
    throttle_metrics;
}
--- requests_after_reload
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'kept',
                     requests => { passed => 3 }, units => { passed => 3 });
    main::counts_are($name, $m, $_) for qw(resized fresh);
    main::metrics_are($name, $m, {
        'nginx_throttle_zone_keys{zone="kept"}' => 1,
        'nginx_throttle_zone_keys{zone="resized"}' => 0,
        'nginx_throttle_zone_size_bytes{zone="resized"}' => 2097152,
    });
    is_deeply(main::series_like($m, qr/zone="gone"/), [],
              "$name: the removed zone is gone");
}
GET /a.txt => 200
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'kept',
                     requests => { passed => 4 }, units => { passed => 4 });
    main::counts_are($name, $m, $_,
                     requests => { passed => 1 }, units => { passed => 1 })
        for qw(resized fresh);
}



=== TEST 8: a small zone filled past its size evicts live keys: keys held plus keys evicted are the keys sent
--- http_config
throttle_zone $http_x_key zone=small:32k rate=1r/m burst=0;
--- config
location = /a.txt {
    throttle zone=small;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    is_deeply(main::one_each('GET /a.txt', 'user-', 2000), { 200 => 2000 },
              "$name: 2000 keys pass");
    my $m = metrics();
    my $keys = $m->{'nginx_throttle_zone_keys{zone="small"}'};
    my $live = $m->{'nginx_throttle_zone_evictions_total{zone="small",state="live"}'};
    cmp_ok($live, '>', 0, "$name: $live live keys evicted");
    is($keys + $live, 2000, "$name: $keys keys held + $live evicted = 2000");
    main::metrics_are($name, $m, {
        'nginx_throttle_zone_evictions_total{zone="small",state="drained"}' => 0,
        'nginx_throttle_zone_size_bytes{zone="small"}' => 32768,
    });
    main::counts_are($name, $m, 'small',
                     requests => { passed => 2000 }, units => { passed => 2000 });
    cmp_ok($m->{'nginx_throttle_zone_bytes{zone="small"}'}, '<=', 32768,
           "$name: zone_bytes within the zone");
}
--- error_log
throttle zone "small" is full: evicting keys that are still limited



=== TEST 9: expired keys make room for new ones: no live key is evicted (those a sweep had not emptied yet count as drained)
--- http_config
throttle_zone $http_x_key zone=small:32k rate=5r/s burst=0;
--- config
location = /a.txt {
    throttle zone=small;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    my $live = 'nginx_throttle_zone_evictions_total{zone="small",state="live"}';
    my $drained = 'nginx_throttle_zone_evictions_total{zone="small",state="drained"}';
    # short keys fill the zone's table (some are evicted live), then
    # expire (200 ms each)
    main::one_each('GET /a.txt', 'u', 1000);
    sleep 0.3;
    my $before = metrics();
    # new keys take the slots of expired ones, in buckets no lookup has
    # swept yet
    my $long = 'L' x 300;
    my $sent = main::one_each('GET /a.txt', $long, 10);
    my $m = metrics();
    # lookups sweep the table a few buckets at a time: most expired keys
    # are gone before a new key needs their slot, so how many count as
    # drained evictions varies (said, not checked)
    note("$name: " . ($m->{$drained} - $before->{$drained})
         . ' expired keys evicted');
    is($m->{$live}, $before->{$live}, "$name: no live key evicted");
    my $answered = $m->{'nginx_throttle_requests_total{zone="small",result="passed"}'}
        + $m->{'nginx_throttle_requests_total{zone="small",result="error_allowed"}'};
    is($answered, 1010, "$name: 1010 requests passed or let through on a full zone")
        or diag(explain $sent);
}



=== TEST 10: strict zone, Redis refused: error_allowed and error_denied counted, no units
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location = /a.txt {
    throttle zone=z;
}
location = /b.txt {
    throttle zone=z;
    throttle_on_error deny;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x3 => 200
  > X-Key: k
GET /b.txt x2 => 429
  > X-Key: k
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'z',
                     requests => { error_allowed => 3, error_denied => 2 });
    main::metrics_are($name, $m, {
        'nginx_throttle_denial_cache_hits_total{zone="z"}' => 0,
    });
    is_deeply(main::series_like($m, qr/sync/), [],
              "$name: a strict zone has no async samples");
}



=== TEST 11: strict zone with Redis: a rejection of Redis's, then three from the denial cache, without Redis
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
--- config
location = /a.txt {
    throttle zone=z;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    # bob has used his one unit, as another nginx would have charged it
    my $now = $redis->time_us;
    $redis->cmd('SET', 'throttle:z:{bob}', $now + 60e6, 'PX', 60_000);
    $stash{calls} = $redis->scripts_run;
}
GET /a.txt x4 => 429
  > X-Key: bob
perl {
    is($redis->scripts_run - $stash{calls}, 1,
       "$name: Redis rejected the first, the zone the other 3");
}
GET /a.txt => 200
  > X-Key: alice
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'z',
                     requests => { passed => 1, rejected => 4 },
                     units    => { passed => 1, rejected => 4 });
    main::metrics_are($name, $m, {
        'nginx_throttle_denial_cache_hits_total{zone="z"}' => 3,
        'nginx_throttle_flight_waits_total{zone="z"}' => 0,
    });
}



=== TEST 12: async zone with Redis: one request's 3 units go in one sync and the key is read once more; nothing pending, no lag
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=100ms;
--- config
location = /a.txt {
    throttle zone=z cost=3;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt => 200
  > X-Key: k
perl {
    my $runs = 'nginx_throttle_sync_runs_total{zone="z",result="ok"}';
    ok(wait_until(5, sub { metrics()->{$runs} == 2 }),
       "$name: two syncs");
    sleep 0.3;    # and no third one
    my $m = metrics();
    main::metrics_are($name, $m, {
        $runs => 2,
        'nginx_throttle_sync_runs_total{zone="z",result="failed"}' => 0,
        'nginx_throttle_sync_keys_total{zone="z"}' => 2,
        'nginx_throttle_sync_pending_units{zone="z"}' => 0,
        'nginx_throttle_sync_lag_seconds{zone="z"}' => '0.000000',
        'nginx_throttle_sync_lost_units_total{zone="z"}' => 0,
    });
    main::counts_are($name, $m, 'z',
                     requests => { passed => 1 }, units => { passed => 3 });
    is_deeply(main::series_like($m, qr/denial/), [],
              "$name: an async zone has no strict samples");
}



=== TEST 13: async zone, Redis refused: the units stay pending and the lag grows with the time since they were charged
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=9 redis=main sync=async sync_interval=100ms;
--- config
location = /a.txt {
    throttle zone=z cost=3;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl: $stash{charged} = time;
GET /a.txt => 200
  > X-Key: k
perl {
    my $failed = 'nginx_throttle_sync_runs_total{zone="z",result="failed"}';
    my $pending = 'nginx_throttle_sync_pending_units{zone="z"}';
    ok(wait_until(5, sub { metrics()->{$failed} >= 1 }),
       "$name: a sync failed");
    sleep 1;
    # a sync in flight holds the units a moment: poll
    my $m;
    ok(wait_until(5, sub { $m = metrics(); $m->{$pending} == 3 }),
       "$name: 3 units pending") or diag(explain $m);
    my $lag = $m->{'nginx_throttle_sync_lag_seconds{zone="z"}'};
    # (nginx's clock is the monotonic one, ours the wall clock: 10 ms of
    # slack for what may separate them)
    my $since = time - $stash{charged};
    ok($lag >= 1 && $lag <= $since + 0.01, "$name: lag $lag s, between 1 s "
       . 'and the ' . sprintf('%.3f', $since) . ' s since the request');
    main::metrics_are($name, $m, {
        'nginx_throttle_sync_runs_total{zone="z",result="ok"}' => 0,
        'nginx_throttle_sync_keys_total{zone="z"}' => 0,
        'nginx_throttle_sync_lost_units_total{zone="z"}' => 0,
    });
}
--- error_log
cannot sync with Redis



=== TEST 14: async zone filled past its size with Redis refused: every evicted key's units are lost, and counted
--- redis
closed
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=100ms connect_timeout=100ms;
throttle_zone $http_x_key zone=z:32k rate=1r/m burst=9 redis=main sync=async sync_interval=100ms;
--- config
location = /a.txt {
    throttle zone=z;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    is_deeply(main::one_each('GET /a.txt', 'user-', 400), { 200 => 400 },
              "$name: 400 keys pass");
    my $m;
    my $settled = sub {
        $m = metrics();
        my $evicted = $m->{'nginx_throttle_zone_evictions_total{zone="z",state="live"}'};
        return $evicted > 0
            && $m->{'nginx_throttle_sync_lost_units_total{zone="z"}'} == $evicted
            && $m->{'nginx_throttle_sync_pending_units{zone="z"}'}
               == $m->{'nginx_throttle_zone_keys{zone="z"}'};
    };
    # a sync in flight holds units a moment: poll
    ok(wait_until(5, $settled),
       "$name: units lost = keys evicted, units pending = keys held")
        or diag(explain main::series_like($m, qr/zone="z"/), $m);
    is($m->{'nginx_throttle_zone_keys{zone="z"}'}
       + $m->{'nginx_throttle_zone_evictions_total{zone="z",state="live"}'},
       400, "$name: keys held + evicted = 400");
}



=== TEST 15: delay=: requests held back count as delayed, those let through at once as passed
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location = /a.txt {
    throttle zone=z delay=2;
}
location = /metrics {
    throttle_metrics;
}
--- requests
# 3 at once, 3 after 100, 200 and 300 ms, 2 rejected
parallel 8 /a.txt => 200 x6, 429 x2
  > X-Key: k
perl {
    main::counts_are($name, metrics(), 'z',
                     requests => { passed => 3, delayed => 3, rejected => 2 },
                     units    => { passed => 6, rejected => 2 });
}



=== TEST 16: dry run, two zones: a zone that would hold a request back counts it delayed_dry_run, even one the other zone would refuse
--- http_config
throttle_zone k zone=a:1m rate=1r/m burst=9;
throttle_zone k zone=b:1m rate=1r/m burst=2;
--- config
location = /a.txt {
    throttle zone=a delay=0;
    throttle zone=b;
    throttle_dry_run on;
}
location = /metrics {
    throttle_metrics;
}
--- requests
# a: the first goes at once, the others would wait a minute and more; b
# would refuse the last 2, which then charge neither zone
GET /a.txt x5 => 200
perl {
    my $m = metrics();
    main::counts_are($name, $m, 'a',
                     requests => { passed => 1, delayed_dry_run => 4 },
                     units    => { passed => 3 });
    main::counts_are($name, $m, 'b',
                     requests => { passed => 3, rejected_dry_run => 2 },
                     units    => { passed => 3, rejected => 2 });
}
