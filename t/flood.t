# SPDX-License-Identifier: BSD-2-Clause
# A flood of distinct keys: 1,000,000 of them at full speed into a 1m zone
# (which holds about 40,000), evicting all the time, while one hot key is
# limited: nothing crashes, the evictions are counted, and the hot key's
# limit holds exactly throughout (it is never evicted: a key looked up
# stays recent, and of two buckets' oldest keys the one that goes stale
# first goes). FLOOD_KEYS sets the number of keys (1000000).

use ThrottleTest;
use Flood ();

run_blocks();

__DATA__

=== TEST 1: 1,000,000 distinct keys into a 1m zone at full speed: no crash, evictions counted, a hot key limited exactly throughout
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/h burst=4;
--- config
keepalive_requests 10000000;
location = /a.txt {
    throttle zone=z;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    my $keys = $ENV{FLOOD_KEYS} || 1_000_000;
    my $t0 = time;
    # two flooding clients, forked
    my $flood = Flood::fork_pipelined($nginx->{port}, "$nginx->{prefix}/flood.out",
                                      int($keys / 2), 'f0-', 'f1-');
    # the hot key, every 20 ms for as long as the flood lasts
    my %hot;
    my $hot = 0;
    while (Flood::running($flood)) {
        my $res = request('GET /a.txt', 'X-Key' => 'hot');
        $hot{ $res->{status} // 'none' }++;
        $hot++;
        sleep 0.02;
    }
    my %flood = %{ Flood::counts($flood) };
    my $took = time - $t0;
    diag(sprintf "%d keys in %.1f s (%.0f/s), %d hot requests",
                 $keys, $took, $keys / $took, $hot);
    is_deeply(\%flood, { 200 => 2 * int($keys / 2) },
              "$name: every distinct key passes, once");
    cmp_ok($hot, '>=', 20, "$name: the hot key asked throughout ($hot times)");
    is($hot{200}, 5, "$name: the hot key passes burst + 1 = 5 times, no more");
    is($hot{429}, $hot - 5, "$name: and is refused every other time");
    # one more, after the flood
    is(request('GET /a.txt', 'X-Key' => 'hot')->{status}, 429,
       "$name: still limited after the flood");
    my $m = metrics();
    my $live = $m->{'nginx_throttle_zone_evictions_total{zone="z",state="live"}'};
    my $held = $m->{'nginx_throttle_zone_keys{zone="z"}'};
    cmp_ok($live, '>', $keys / 2, "$name: $live live keys evicted");
    cmp_ok($held, '>=', 30_000, "$name: a full 1m zone holds $held keys");
    is($held + $live, 2 * int($keys / 2) + 1,
       "$name: keys held + keys evicted = keys sent");
}
--- error_log
throttle zone "z" is full: evicting keys that are still limited
