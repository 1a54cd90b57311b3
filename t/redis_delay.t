# SPDX-License-Identifier: BSD-2-Clause
# delay= with Redis: a strict zone holds requests back by Redis's answer
# (its reset_after, the TAT it moved to), an async zone by its own view;
# both as a local zone does for the same timeline, sent to them at the
# same time in one nginx. The wait of a strict zone's request starts when
# Redis's answer comes back, and ends through the same re-run of the
# phase.
#
# Rates are 10r/s or 5r/s: a wait is a whole T of 100 or 200 ms; times
# are compared within Timeline::tolerance() (40 ms), each timed location
# saying when nginx read and answered each request (X-Timing, see
# t/lib/Timeline.pm).

use ThrottleTest;

require_redis_module();

package ThrottleTest::Step;

use List::Util ();
use Timeline qw(tolerance burst waits_are header_values_are
                quit_while_waiting);

# Sends t/delay.t's timeline (bursts beyond burst + 1, bursts into a
# funnel part full, requests on their own) to every location at once; a
# test per group and location: as $reference. Returns the responses.
sub same_timeline {
    my ($name, $reference, @locations) = @_;
    my @groups = ([0, 8], [0.85, 1], [0.9, 6], [1.3, 1], [1.55, 1],
                  [1.6, 2], [2.5, 3]);
    my @res = Timeline::fire($CURRENT->{port}, [
        Timeline::groups(\@groups, [$reference, @locations], 'X-Key' => 'k')]);
    Timeline::same_outcomes($name, \@res, $reference, $_, tolerance())
        for @locations;
    return @res;
}

# $throttle_status of each response, counted: PASSED => n, ...
sub statuses {
    my %count;
    $count{ $_->{headers}{'x-status'} // 'none' }++ for @_;
    return %count;
}

# A test: in each group, $second's requests have the $throttle_status of
# $first's, but for requests $first passed at once that $second DELAYED
# for no longer than the tolerance, as same_timeline allows: a strict
# zone's clock is Redis's when its script runs, which a loaded machine may
# hold back a little.
sub same_statuses {
    my ($name, $responses, $first, $second) = @_;
    my $last = List::Util::max(map { $_->{group} } @$responses);
    my $show = sub {
        my %c = @_;
        join ', ', map { "$c{$_} $_" } grep { $c{$_} } sort keys %c;
    };
    my @differ;
    for my $g (0 .. $last) {
        my @x = Timeline::outcome($responses, $g, $first);
        my @y = Timeline::outcome($responses, $g, $second);
        my %cx = statuses(@x);
        my %cy = statuses(@y);
        my $moved = ($cy{DELAYED} // 0) - ($cx{DELAYED} // 0);
        my @held = sort { $a <=> $b }
                   map { ($_->{answered} // 9e9) - ($_->{started} // 0) }
                   grep { ($_->{headers}{'x-status'} // '') eq 'DELAYED' } @y;
        if ($moved > 0 && $held[$moved - 1] <= tolerance()) {
            $cy{PASSED} = ($cy{PASSED} // 0) + $moved;
            $cy{DELAYED} -= $moved;
        }
        push @differ, "group $g: $first " . $show->(statuses(@x))
                      . "; $second " . $show->(statuses(@y))
            unless $show->(%cx) eq $show->(%cy);
    }
    Test::More::ok(!@differ, "$name: ${second}'s statuses as ${first}'s")
        or Test::More::diag(join "\n", @differ);
}

package main;

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main" of a block
with one Redis.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;


=== TEST 1: strict: Redis's answers hold requests back as a local zone does, delay=2 and delay=0
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=local:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=strict:1m rate=10r/s burst=5 redis=main;
throttle_zone $http_x_key zone=local0:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=strict0:1m rate=10r/s burst=5 redis=main;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Status $throttle_status always;
location /local/   { throttle zone=local delay=2;   alias $TEST_NGINX_HTML_DIR/; }
location /strict/  { throttle zone=strict delay=2;  alias $TEST_NGINX_HTML_DIR/; }
location /local0/  { throttle zone=local0 delay=0;  alias $TEST_NGINX_HTML_DIR/; }
location /strict0/ { throttle zone=strict0 delay=0; alias $TEST_NGINX_HTML_DIR/; }
--- requests
perl {
    my $calls = $redis->scripts_run;
    my @res = same_timeline("$name (delay=2)", 'local', 'strict');
    # 13 PASSED, 6 DELAYED and 3 REJECTED on time; nginx's clock decides
    # which side of a boundary a request falls (t/delay.t counts them)
    my %status = statuses(grep { $_->{loc} eq 'local' } @res);
    is_deeply([sort grep { $status{$_} } keys %status],
              [qw(DELAYED PASSED REJECTED)],
              "$name: the timeline passes, delays and rejects");
    same_statuses($name, \@res, 'local', 'strict');
    cmp_ok($redis->scripts_run - $calls, '>=', 19,
           "$name: its admissions were Redis's");
    same_timeline("$name (delay=0)", 'local0', 'strict0');
}



=== TEST 2: async: the zone holds requests back as a local zone does
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=local:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=async:1m rate=10r/s burst=5 redis=main sync=async sync_interval=100ms;
--- config
add_header X-Timing "$msec $request_time" always;
location /local/ { throttle zone=local delay=2; alias $TEST_NGINX_HTML_DIR/; }
location /async/ { throttle zone=async delay=2; alias $TEST_NGINX_HTML_DIR/; }
--- requests
perl {
    my $calls = $redis->scripts_run;
    same_timeline($name, 'local', 'async');
    cmp_ok($redis->scripts_run - $calls, '>', 0,
           "$name: the async zone synced with Redis meanwhile");
}



=== TEST 3: a strict zone and a local one in a location: the local zone, decided once Redis has answered, holds requests back as well as the strict one
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=s1:1m rate=10r/s burst=5 redis=main;
throttle_zone $http_x_key zone=l1:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=s2:1m rate=10r/s burst=5 redis=main;
throttle_zone $http_x_key zone=l2:1m rate=10r/s burst=5;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Delay $throttle_delay always;
location /strict-waits/ {
    throttle zone=s1 delay=0;
    throttle zone=l1;
    alias $TEST_NGINX_HTML_DIR/;
}
location /local-waits/ {
    throttle zone=s2;
    throttle zone=l2 delay=0;
    alias $TEST_NGINX_HTML_DIR/;
}
--- requests
perl {
    # (which zone holds a request back longest depends on the order of
    # Redis's decisions and of the local zone's, which may differ: one
    # zone waits here, the other never does)
    for my $uri ('/strict-waits/a.txt', '/local-waits/a.txt') {
        my @res = burst($nginx->{port}, 4, $uri, 'k');
        waits_are($name, $uri, \@res, 0, 100, 200, 300);
        header_values_are($name, $uri, \@res, 'X-Delay',
                          0, '~100', '~200', '~300');
    }
}
--- error_log
~ delaying request by \d+ ms by zone "s1"
~ delaying request by \d+ ms by zone "l2"



=== TEST 4: a client that goes away while a strict zone holds its request: the request ends then, logged 499
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/m burst=5 redis=main;
log_format delay '$uri $status $request_time $throttle_status';
--- config
access_log $TEST_NGINX_PREFIX/logs/access.log delay;
location / {
    throttle zone=z delay=0;
}
--- requests
GET /a.txt => 200
  > X-Key: k
perl {
    # the next one waits a minute
    my $s = ThrottleTest::connect_to($nginx) or die "connect: $!";
    syswrite $s, "GET /b.txt HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n"
               . "Connection: close\r\n\r\n";
    ok(all_read(), "$name: the request waits");
    sleep 0.2;
    close $s;
    my $log = "$nginx->{prefix}/logs/access.log";
    ok(wait_until(2, sub {
        Processes::read_file($log) =~ m{^/b\.txt 499 [\d.]+ DELAYED$}m
    }), "$name: logged 499 soon after the close, long before its minute")
        or diag(Processes::read_file($log));
    ok(all_closed(), "$name: nothing is left open");
}
GET /a.txt => 200
  > X-Key: other



=== TEST 5: nginx -s quit while strict requests wait: they finish
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=5r/s burst=5 redis=main;
--- config
location / {
    add_header X-Timing "$msec $request_time" always;
    throttle zone=z delay=0;
}
--- requests
perl: quit_while_waiting($name, $nginx);
