# SPDX-License-Identifier: BSD-2-Clause
# A flooded strict key (issue 27): two nginx (2 workers each) on one
# redis-server, one key at 50r/s burst=10, flooded by 64 keep-alive
# connections (wrk, 32 a nginx) for 5 s. The limit holds exactly (the
# admitted requests are within what one exact funnel admits over the
# span from the first to the last), and Redis runs few scripts per
# admitted request: while a script for the key is in flight from an
# nginx, its other requests for the key wait for the answer, and most are
# rejected from it (docs/modes.md, "A flooded key").
#
# The figures (requests, admitted, scripts and scripts per admitted
# request, the admitted requests' latency) are printed as a diag.
# FLOOD_SECONDS (default 5) and FLOOD_CONNECTIONS (default 64) change the
# flood.

use strict;
use warnings;

use List::Util qw(sum);
use Time::HiRes ();
use Test::More;
use Flood qw(wrk_path start_wrk finish_wrk wrk_figures funnel_bounds);
use Processes qw(read_file);
use RedisServer;
use ThrottleTest;

require_redis_module();

plan skip_all => 'wrk is not installed' unless wrk_path();

my $RATE    = 50;
my $BURST   = 10;
my $SECONDS = $ENV{FLOOD_SECONDS}     // 5;
my $CONNS   = $ENV{FLOOD_CONNECTIONS} // 64;

my $redis = RedisServer->start;
my $port  = $redis->port;

my %conf = (
    http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port;
throttle_zone \$http_x_key zone=flood:1m rate=${RATE}r/s burst=$BURST redis=main;
# half a million rejections: not one line each
error_log \$TEST_NGINX_PREFIX/logs/error.log warn;
log_format admitted '\$http_x_key \$msec \$request_time';
map \$status \$admitted { 200 1; default 0; }
HTTP
    config => <<'SERVER',
location / {
    throttle zone=flood;
    throttle_log_level info;
    access_log $TEST_NGINX_PREFIX/logs/admitted.log admitted if=$admitted;
}
location = /metrics {
    throttle_metrics;
}
SERVER
);

my @nodes = map { start_instance(%conf) } 1 .. 2;

# warm: each nginx knows the script (no NOSCRIPT in the count)
http_request($_, 'GET /a.txt', 'X-Key' => 'warm') for @nodes;

my $before = $redis->script_calls;
my @out = run_wrk(@nodes);
my $scripts = $redis->script_calls - $before;

my $fig = wrk_figures(@out);
my ($requests, $errors) = @$fig{qw(requests errors)};
my $admitted = $requests - $fig->{non2xx};
my @all_latency = map { /Latency\s+(\S+)\s+\S+\s+(\S+)/ ? "avg $1 max $2" : () }
                  @out;
ok($requests > 0, "the flood ran ($requests requests)")
    or diag(join "\n", @out);
is($errors, 0, 'no socket errors') or diag(join "\n", @out);

# what each nginx logged of the admitted requests: when, and how long
my (@at, @took);
for my $n (@nodes) {
    for (split /\n/, read_file("$n->{prefix}/logs/admitted.log")) {
        my ($key, $at, $took) = split / /;
        next unless $key eq 'flood';
        push @at, $at;
        push @took, $took * 1000;
    }
}
# wrk does not count the answers still on their way when it stops: the
# nginx's logs do
cmp_ok(abs(scalar(@at) - $admitted), '<=', $CONNS,
       'the admitted requests logged are those wrk counted, but for the '
       . 'last answers') or diag("logged " . scalar(@at) . ", wrk $admitted");
$admitted = scalar @at;

# one exact funnel, flooded over the span from the first admission to the
# last, admits burst+1 at once then one per emission interval: floor and
# ceiling allow 0.1 s of the span's timing (the log's milliseconds, and
# the time a flooded worker takes to answer)
my ($floor, $ceiling, $span) = funnel_bounds($RATE, $BURST, \@at);
cmp_ok($admitted, '<=', $ceiling, "admitted at most the ideal's ceiling");
cmp_ok($admitted, '>=', $floor, "admitted at least the ideal's floor");

# the requests that waited for the key's script in flight, by each nginx
my $waits = 0;
for my $n (@nodes) {
    my $m = http_request($n, 'GET /metrics');
    $waits += $1
        if ($m->{body} // '') =~ /^nginx_throttle_flight_waits_total\{zone="flood"\} (\d+)/m;
}
ok($waits > 0, "requests waited for the key's script in flight ($waits)");

my $per = $admitted ? $scripts / $admitted : 0;
@took = sort { $a <=> $b } @took;
my $mean = @took ? sum(@took) / @took : 0;
my $p99  = @took ? $took[ int(0.99 * $#took) ] : 0;
diag(sprintf 'flood: %d requests, %d admitted (ideal %d..%d over %.3f s), '
     . '%d scripts, %.1f per admitted; admitted latency mean %.1f ms, '
     . 'p50 %.0f ms, p99 %.0f ms, max %.0f ms',
     $requests, $admitted, $floor, $ceiling, $span, $scripts, $per, $mean,
     (@took ? $took[ int(0.5 * $#took) ] : 0), $p99, (@took ? $took[-1] : 0));
diag('flood: every request\'s latency, as each wrk saw it: '
     . join('; ', @all_latency));
cmp_ok($per, '<=', 4, 'at most 4 scripts reached Redis per admitted request');

# A stalled Redis: the key's flight times out, and the requests that waited
# for it are answered by throttle_on_error about when it does, not a
# timeout later each.
{
    my $stall = start_instance(
        http_config => <<"HTTP",
throttle_redis stalled server=127.0.0.1:$port timeout=200ms;
throttle_zone \$http_x_key zone=stall:1m rate=1r/s burst=0 redis=stalled;
HTTP
        config => <<'SERVER');
location / {
    throttle zone=stall;
    add_header X-Status $throttle_status always;
    add_header X-Pid $pid always;
}
SERVER
    my $res = http_request($stall, 'GET /a.txt', 'X-Key' => 'stall');
    is($res->{status}, 200, 'stalled: the first request passes');
    select undef, undef, undef, 1.1;    # the memory's bound has passed
    $redis->pause;
    my $t0 = Time::HiRes::time();
    my @res = http_parallel($stall, 16, 'GET /a.txt', 'X-Key' => 'stall');
    my $took = Time::HiRes::time() - $t0;
    $redis->resume;
    my %x;
    my %pids;
    $x{ $_->{headers}{'x-status'}[0] // 'none' }++ for @res;
    $pids{ $_->{headers}{'x-pid'}[0] // '' }++ for @res;
    is(join(' ', map { "$_=$x{$_}" } sort keys %x), 'ERROR_ALLOWED=16',
       'stalled: every request gets throttle_on_error');
    diag(sprintf 'stalled: 16 requests answered in %.0f ms (timeout 200 ms),'
         . ' by workers %s', $took * 1000,
         join(', ', map { "$_: $pids{$_}" } sort keys %pids));
    cmp_ok($took, '<', 0.35, 'stalled: within the timeout, and a little');
    my $log = stop_instance($stall);
    unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
           'stalled: no crash, alert or crit in error.log');
}

for my $i (0, 1) {
    my $log = stop_instance($nodes[$i]);
    unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
           'node ' . ($i + 1) . ': no crash, alert or crit in error.log');
    unlike($log, qr/throttle redis|Redis answered/,
           'node ' . ($i + 1) . ': no Redis errors logged');
}
$redis->stop;

done_testing();

# wrk on each nginx at once, $CONNS / 2 connections each; their outputs.
sub run_wrk {
    my @envs = @_;
    return finish_wrk(map {
        start_wrk(url => "http://127.0.0.1:$_->{port}/a.txt",
                  connections => int($CONNS / @envs), seconds => $SECONDS,
                  headers => ['X-Key: flood'])
    } @envs);
}
