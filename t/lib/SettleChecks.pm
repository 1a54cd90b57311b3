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
#     redis_units($redis, $emission_us)
#         the units Redis's one key (a GCRA TAT, microseconds of Redis's
#         clock) holds at Redis's clock, to the nearest, at $emission_us a
#         unit
#     redis_units_are($redis, $emission_us, $want)
#         whether they become $want within 2 s (an async zone's sync)
#
# And for plain scripts:
#
#     settle_in_flight($name, sub { my ($env) = @_; ... })
#         a strict zone's settle on its way when nginx is signalled: a
#         redis-server and an nginx of 2 workers on it (1r/h, the zone
#         "tokens", /metrics) are started; a slow answer admitted by Redis
#         ends while Redis is paused for 3 s (CLIENT PAUSE WRITE), so that
#         its settle script (5 units used, 1 reserved) waits there. Then
#         the code signals nginx (QUIT, a reload) and waits as it needs
#         to; nginx is stopped after it, if it still runs. Checks that the
#         exit waited for Redis, which holds the key's 5 units in the end,
#         and that nothing went wrong in error.log.
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';
use Processes ();
use RedisServer;
use Test::More ();
use ThrottleTest qw(start_instance stop_instance);
use ThrottleTest::Step ();
use Time::HiRes ();

our @EXPORT_OK = qw(settled_lines_are settles_are settle_in_flight redis_units
                    redis_units_are);

sub redis_units {
    my ($redis, $emission_us) = @_;
    my ($key) = $redis->keys_matching('*');
    my $tat_us = $redis->cmd('GET', $key // 'none') // 0;
    my $time = $redis->cmd('TIME');
    my $ahead_us = $tat_us - ($time->[0] * 1e6 + $time->[1]);
    return $ahead_us > 0 ? sprintf('%.0f', $ahead_us / $emission_us) : 0;
}

sub redis_units_are {
    my ($redis, $emission_us, $want) = @_;
    return Processes::wait_until(
        2, sub { redis_units($redis, $emission_us) == $want });
}

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

sub settle_in_flight {
    my ($name, $signal) = @_;
    my $redis = RedisServer->start;
    my $port = $redis->port;
    my $env = start_instance(
        http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port timeout=5s;
throttle_zone \$http_x_api_key zone=tokens:1m rate=1r/h burst=999 redis=main;
HTTP
        config => <<'SERVER');
location = /big.txt {
    throttle zone=tokens settle=$http_x_used;
    limit_rate 256k;
}
location = /metrics {
    throttle_metrics;
}
SERVER
    open my $fh, '>', "$env->{prefix}/html/big.txt" or die "big.txt: $!";
    print $fh 'x' x (512 << 10);
    close $fh;

    my $c = ThrottleTest::connect_to($env);
    print $c "GET /big.txt HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: k\r\n"
           . "X-Used: 5\r\nConnection: close\r\n\r\n";
    my $got = '';
    while ($got !~ /\r\n\r\n/ && sysread($c, my $buf, 4096)) {
        $got .= $buf;
    }
    Test::More::like($got, qr{^HTTP/1\.1 200 }, "$name: admitted (Redis decided)");
    my $paused = Time::HiRes::time();
    $redis->cmd('CLIENT', 'PAUSE', 3000, 'WRITE');
    1 while sysread($c, my $buf, 65536);    # the answer ends: the settle goes
    close $c;
    Test::More::ok(
        Processes::wait_until(2, sub { $redis->scripts_waiting >= 1 }),
        "$name: the settle script waits in Redis");

    $signal->($env);
    Test::More::cmp_ok(Time::HiRes::time() - $paused, '>=', 2.5,
                       "$name: the worker waited for Redis's answer");
    my $log = stop_instance($env);
    my $keys = $redis->cmd('KEYS', '*');
    my @keys = ref $keys ? @$keys : ();
    Test::More::is(scalar @keys, 1, "$name: one key in Redis");
    # 1 reserved + 4 settled at 1r/h: 5 hours ahead
    my $pttl_ms = $redis->cmd('PTTL', $keys[0] // 'none');
    Test::More::cmp_ok(abs($pttl_ms - 5 * 3600 * 1000), '<', 60_000,
                       "$name: the key holds the 5 units (PTTL $pttl_ms ms)");
    Test::More::unlike($log, qr/\[(alert|crit|error)\]/,
                       "$name: nothing went wrong");
    $redis->stop;
}

1;
