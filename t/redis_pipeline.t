# SPDX-License-Identifier: BSD-2-Clause
# A connection to Redis that is never idle: each worker's commands follow
# one another on its one connection, and under steady load some command
# always waits for its reply. Each is answered in well under the
# backend's timeout, so none may time out. (nginx keeps a timer that is
# re-armed within 300 ms of its old time where it was: the first
# command's deadline would fire while younger commands wait, and fail
# them all, unless the deadline is checked against the oldest command
# that still waits.)
#
# Four clients pipeline 4,000 requests each (HTTP/1.1 pipelining: all
# written at once, the answers read as they come), on a strict zone whose
# requests each send a second script when they end (settle=2): about a
# second of traffic against timeout=100ms.

use strict;
use warnings;

use IO::Select;
use RedisServer;
use Test::More;
use ThrottleTest;

require_redis_module();

use constant { CLIENTS => 4, REQUESTS => 4000 };

# Writes every client's requests, then reads the answers of all of them
# as they come; returns the count of each status.
sub pipelined {
    my ($env) = @_;
    my (%status, %buffer);
    my $select = IO::Select->new;
    for my $client (1 .. CLIENTS) {
        my $c = ThrottleTest::connect_to($env);
        my $one = "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-Key: k\r\n";
        print $c join '', ("$one\r\n") x (REQUESTS - 1), "${one}Connection: close\r\n\r\n";
        $select->add($c);
        $buffer{$c} = '';
    }
    my $deadline = time + 60;
    while ($select->count && time < $deadline) {
        for my $c ($select->can_read(1)) {
            if (sysread($c, my $chunk, 65536)) {
                $buffer{$c} .= $chunk;
            } else {
                $status{$1}++ while $buffer{$c} =~ m{^HTTP/1\.1 (\d{3}) }mg;
                $select->remove($c);
                close $c;
            }
        }
    }
    return \%status;
}

my $redis = RedisServer->start;
my $port = $redis->port;
my $env = start_instance(
    http_config => <<"HTTP",
keepalive_requests 100000;
throttle_redis main server=127.0.0.1:$port timeout=100ms;
throttle_zone \$http_x_key zone=z:1m rate=1000000r/s burst=1000000 redis=main;
HTTP
    config => <<'SERVER');
location = /a.txt {
    throttle zone=z settle=2;
    throttle_on_error deny;
}
location = /metrics {
    throttle_metrics;
}
SERVER

my $status = pipelined($env);
my $all = CLIENTS * REQUESTS;
is_deeply($status, { 200 => $all }, "the $all pipelined requests pass")
    or diag(explain($status));
my $metrics = do {
    local $ThrottleTest::Step::CURRENT = $env;
    ThrottleTest::Step::metrics();
};
is($metrics->{'nginx_throttle_redis_errors_total{backend="main",kind="timeout"}'},
   0, 'no command timed out');
my $log = stop_instance($env);
unlike($log, qr/no reply within/, 'the error log has no timeout');
$redis->stop;

done_testing();
