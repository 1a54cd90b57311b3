# SPDX-License-Identifier: BSD-2-Clause
# Two nginx instances (2 workers each) sharing one redis-server and one
# strict zone: the limit holds across them exactly, whether the requests
# alternate or arrive at both at once; one node sees what the other spent;
# a denial cached by one node does not stop the other from asking Redis.

use strict;
use warnings;

use Test::More;
use RedisServer;
use Responses qw(status_of);
use ThrottleTest;

require_redis_module();

my $redis = RedisServer->start;
my $port  = $redis->port;

my %conf = (
    http_config => <<"HTTP",
throttle_redis main server=127.0.0.1:$port;
throttle_zone \$http_x_key zone=shared:1m rate=1r/m burst=9 redis=main;
HTTP
    config => <<'SERVER',
location / {
    throttle zone=shared;
    add_header X-Status $throttle_status always;
    add_header X-Remaining $throttle_remaining always;
    add_header X-Pid $pid always;
}
SERVER
);

my @nodes = map { start_instance(%conf) } 1 .. 2;
isnt($nodes[0]{port}, $nodes[1]{port}, 'two nginx instances on their own ports');

# 40 requests alternating between the two nodes: exactly 10 pass
{
    my (%count, %by_node, %pids);
    for my $i (0 .. 39) {
        my $node = $i % 2;
        my $res = http_request($nodes[$node], 'GET /a.txt', 'X-Key' => 'alt');
        $count{ status_of($res) }++;
        $by_node{$node}++ if ($res->{status} // 0) == 200;
        $pids{$node}{ $res->{headers}{'x-pid'}[0] // '' } = 1;
    }
    is_deeply(\%count, { 200 => 10, 429 => 30 },
              'alternating: 10 of 40 pass in total');
    ok($by_node{0} && $by_node{1}, 'alternating: both nodes admitted some')
        or diag(explain \%by_node);
}

# 20 at once to each node: exactly 10 pass in total
{
    my %count;
    my @a = http_parallel($nodes[0], 20, 'GET /a.txt', 'X-Key' => 'par');
    my @b = http_parallel($nodes[1], 20, 'GET /a.txt', 'X-Key' => 'par');
    $count{ status_of($_) }++ for @a, @b;
    is_deeply(\%count, { 200 => 10, 429 => 30 },
              'parallel on both nodes: 10 of 40 pass in total');
}

# truly concurrent: both nodes' batches written before any is read
{
    my %count;
    my @socks;
    for my $i (0 .. 39) {
        my $node = $nodes[ $i % 2 ];
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $node->{port},
                                      Proto => 'tcp', Timeout => 5);
        push @socks, $s if $s;
    }
    my $msg = "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-Key: conc\r\n"
            . "Connection: close\r\n\r\n";
    syswrite $_, $msg for @socks;
    for my $s (@socks) {
        my $res = ThrottleTest::http_read($s, { method => 'GET' });
        close $s;
        $count{ status_of($res) }++;
    }
    is_deeply(\%count, { 200 => 10, 429 => 30 },
              'interleaved, concurrent on both nodes: 10 of 40 pass');
}

# what one node spends, the other sees
{
    http_request($nodes[0], 'GET /a.txt', 'X-Key' => 'seen') for 1 .. 3;
    my $res = http_request($nodes[1], 'GET /a.txt', 'X-Key' => 'seen');
    is($res->{headers}{'x-remaining'}[0], 6,
       'node 2 sees the 3 units node 1 spent (6 left after its own)');
    is($res->{headers}{ratelimit}[0], '"shared";r=6;t=240',
       'node 2: RateLimit accordingly');
}

# a denial cached on node 1 does not decide node 2's first request: Redis
# does (and rejects it too); node 2 then caches it as well
{
    http_request($nodes[0], 'GET /a.txt', 'X-Key' => 'cache') for 1 .. 11;
    my $before = $redis->script_calls;
    my $res = http_request($nodes[1], 'GET /a.txt', 'X-Key' => 'cache');
    is(status_of($res), 429, 'node 2 rejects a key full in Redis');
    is($redis->script_calls - $before, 1, '... asking Redis once');
    $before = $redis->script_calls;
    http_request($nodes[1], 'GET /a.txt', 'X-Key' => 'cache') for 1 .. 10;
    cmp_ok($redis->script_calls - $before, '<=', 1,
           '... then from its own denial cache');
}

for my $i (0, 1) {
    my $log = stop_instance($nodes[$i]);
    unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
           "node " . ($i + 1) . ": no crash, alert or crit in error.log");
    unlike($log, qr/throttle redis/,
           "node " . ($i + 1) . ": no Redis errors logged");
}

# stopped nginx leaves no connection behind
{
    my $deadline = time + 3;
    my @clients;
    while (1) {
        @clients = grep { !/\buser=harness\b/ }
                   split /\n/, $redis->cmd('CLIENT', 'LIST');
        last if !@clients || time > $deadline;
        select undef, undef, undef, 0.05;
    }
    is(scalar @clients, 0, 'both nginx stopped: no connection left in Redis')
        or diag(join "\n", @clients);
}

my @keys = $redis->keys_matching('throttle:shared:*');
is(scalar @keys, 5, 'five keys in the shared Redis') or diag("@keys");
$redis->stop;

done_testing();
