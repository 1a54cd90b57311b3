# SPDX-License-Identifier: BSD-2-Clause
# src/scripts/gcra.lua on a real redis-server: redis-cell's reference
# vectors (with the test-only "now" in ARGV[5]), Redis TIME when "now" is
# absent, what the key holds (the TAT in microseconds, with a TTL), and a
# rejection storing nothing. No nginx here.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use RedisServer;
use Test::More;

my $script_file = "$FindBin::Bin/../src/scripts/gcra.lua";
plan skip_all => "$script_file not there yet" unless -f $script_file;
plan skip_all => 'redis-server is not installed (apt-get install redis-server)'
    unless RedisServer::available();

my $script = RedisServer::script_source('gcra');

my $redis = RedisServer->start;

# EVAL of the file's content, one key; returns the reply.
sub gcra {
    my ($key, @argv) = @_;
    return $redis->cmd('EVAL', $script, 1, $key, @argv);
}

sub reply_text {
    my ($r) = @_;
    return ref $r eq 'ARRAY' ? join(',', @$r) : "not an array: $r";
}

# ---------------------------------------------------------------------------
# redis-cell's it_rate_limits: burst 4, 1 r/s; times in ms from S;
# cost => limited, remaining, reset_after_ms, retry_after_ms

my ($T, $DVT, $LIMIT) = (1_000_000, 5_000_000, 5);

my @vectors = (
    [0,    6, 1, 5, 0,    -1],
    [0,    1, 0, 4, 1000, -1],
    [0,    1, 0, 3, 2000, -1],
    [0,    1, 0, 2, 3000, -1],
    [0,    1, 0, 1, 4000, -1],
    [0,    1, 0, 0, 5000, -1],
    [0,    1, 1, 0, 5000, 1000],
    [3000, 1, 0, 2, 3000, -1],
    [3100, 1, 0, 1, 3900, -1],
    [4000, 1, 0, 1, 4000, -1],
    [8000, 1, 0, 4, 1000, -1],
    [9500, 1, 0, 4, 1000, -1],
    [9500, 0, 0, 4, 1000, -1],
    [9500, 2, 0, 2, 3000, -1],
    [9500, 5, 1, 2, 3000, 3000],
);

{
    # S near Redis's own clock: the keys' PX expiry runs on the real clock,
    # and the fake "now" is always ahead of it, so no key expires early
    my $S   = $redis->time_us;
    my $key = 'vectors:{cell}';
    my $i   = 0;
    for my $v (@vectors) {
        my ($at, $cost, @want) = @$v;
        $i++;
        my @expect = ($want[0], $LIMIT, $want[1],
                      map { $_ < 0 ? $_ : $_ * 1000 } @want[2, 3]);
        my $got = gcra($key, $T, $DVT, $LIMIT, $cost, $S + $at * 1000);
        is(reply_text($got), join(',', @expect),
           "vector $i: t=${at}ms cost=$cost => limited=$want[0] "
           . "remaining=$want[1] reset=$want[2]ms retry=$want[3]ms");
    }
}

# ---------------------------------------------------------------------------
# The key: TAT in microseconds as an integer string, with a TTL; a
# rejection stores nothing

{
    my $S   = $redis->time_us;
    my $key = 'throttle:state:{alice}';

    my $r = gcra($key, $T, $DVT, $LIMIT, 1, $S);
    is(reply_text($r), "0,5,4,1000000,-1", 'fresh key: admitted, 4 left');

    my $v = $redis->cmd('GET', $key);
    like($v // '', qr/^\d+$/, 'the key holds an integer string');
    is($v, $S + $T, 'the key holds the TAT in microseconds: now + T');
    my $pttl = $redis->cmd('PTTL', $key);
    cmp_ok($pttl, '>', 0, "the key has a TTL (PTTL $pttl)");
    cmp_ok($pttl, '<=', 1000, 'the TTL is at most the time to drain');

    gcra($key, $T, $DVT, $LIMIT, 1, $S) for 1 .. 4;
    my $full = $redis->cmd('GET', $key);
    is($full, $S + 5 * $T, 'five admitted: TAT = now + 5 T');

    $r = gcra($key, $T, $DVT, $LIMIT, 1, $S);
    is(reply_text($r), "1,5,0,5000000,1000000", 'sixth: rejected');
    is($redis->cmd('GET', $key), $full, 'a rejection leaves the TAT alone');

    $r = gcra($key, $T, $DVT, $LIMIT, 0, $S);
    is(reply_text($r), "0,5,0,5000000,-1", 'cost 0 reports without charging');
    is($redis->cmd('GET', $key), $full, 'cost 0 leaves the TAT alone');

    # a cost that can never fit: rejected, no retry, nothing stored
    my $k2 = 'throttle:state:{never}';
    $r = gcra($k2, $T, $DVT, $LIMIT, 6, $S);
    is(reply_text($r), "1,5,5,0,-1", 'cost > limit: rejected, retry -1');
    is($redis->cmd('EXISTS', $k2), 0, 'cost > limit: no key written');
}

# ---------------------------------------------------------------------------
# Without ARGV[5], "now" is Redis TIME

{
    my $key    = 'throttle:time:{bob}';
    my $before = $redis->time_us;
    my $r      = gcra($key, $T, $DVT, $LIMIT, 1);
    my $after  = $redis->time_us;
    is(reply_text($r), "0,5,4,1000000,-1", 'Redis TIME: fresh key admitted');
    my $tat = $redis->cmd('GET', $key);
    ok($tat >= $before + $T && $tat <= $after + $T,
       'Redis TIME: TAT = TIME + T')
        or diag("before $before, after $after, TAT $tat");
    cmp_ok($redis->cmd('PTTL', $key), '>', 0, 'Redis TIME: the key has a TTL');

    # a stale TAT (in the past) counts as fresh
    $redis->cmd('SET', $key, $before - 10 * $T);
    $r = gcra($key, $T, $DVT, $LIMIT, 2);
    is(reply_text($r), "0,5,3,2000000,-1", 'a TAT in the past is fresh');
}

# ---------------------------------------------------------------------------
# Large values stay exact (all below 2^53): 1 r/d, burst 999

{
    my $key = 'throttle:big:{carol}';
    my $Td  = 86_400_000_000;
    my $S   = $redis->time_us;
    my $r   = gcra($key, $Td, $Td * 1000, 1000, 999, $S);
    is(reply_text($r), join(',', 0, 1000, 1, 999 * $Td, -1),
       '1r/d burst 999: 999 units charged at once');
    is($redis->cmd('GET', $key), $S + 999 * $Td, '1r/d: exact TAT');
    $r = gcra($key, $Td, $Td * 1000, 1000, 2, $S + 1);
    is(reply_text($r), join(',', 1, 1000, 1, 999 * $Td - 1, $Td - 1),
       '1r/d: two more units wait one day less 1 us');
}

# ---------------------------------------------------------------------------
# EVALSHA works once loaded (the module's path), NOSCRIPT after a flush

{
    my $sha = $redis->cmd('SCRIPT', 'LOAD', $script);
    like($sha, qr/^[0-9a-f]{40}$/, 'SCRIPT LOAD gives a SHA1');
    my $S = $redis->time_us;
    my $r = $redis->cmd('EVALSHA', $sha, 1, 'throttle:sha:{dave}',
                        $T, $DVT, $LIMIT, 1, $S);
    is(reply_text($r), "0,5,4,1000000,-1", 'EVALSHA decides');
    $redis->cmd('SCRIPT', 'FLUSH');
    $r = $redis->cmd('EVALSHA', $sha, 1, 'throttle:sha:{dave}',
                     $T, $DVT, $LIMIT, 1, $S);
    like("$r", qr/^NOSCRIPT/, 'after SCRIPT FLUSH: NOSCRIPT');
}

$redis->stop;
done_testing();
