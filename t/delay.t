# SPDX-License-Identifier: BSD-2-Clause
# throttle ... delay=N: requests a zone admits beyond N units ahead of
# them wait, as limit_req's delay= makes them: held to the same timeline,
# throttle and limit_req (in the same nginx, at the same time) reject the
# same requests and answer the others at the same times. A wait is a
# timer: a client that goes away is noticed, and a quit or a reload lets
# waiting requests finish.
#
# Rates are 10r/s or 5r/s: a wait is a whole T of 100 or 200 ms, far above
# what scheduling on a busy machine adds. Times are compared within
# tolerance() (40 ms), against limit_req measured in the same run, or
# against the wait the rule gives (never less than it, by more than the
# rounding of a microsecond clock to milliseconds); every timed location
# says when nginx read and answered each request (X-Timing, see
# t/lib/Timeline.pm), so that a test process the machine holds back does
# not make a wait look longer.

use ThrottleTest;

package ThrottleTest::Step;

use Timeline qw(tolerance burst statuses_are waits_are header_values_are
                quit_while_waiting);

package main;

run_blocks();

__DATA__

=== TEST 1: held to the same timeline, throttle delays and rejects as limit_req (delay=2, and delay=0 against limit_req without nodelay)
--- http_config
limit_req_zone $http_x_key zone=lr:1m rate=10r/s;
limit_req_zone $http_x_key zone=lr0:1m rate=10r/s;
throttle_zone $http_x_key zone=th:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=th0:1m rate=10r/s burst=5 algorithm=gcra;
limit_req_status 429;
--- config
add_header X-Timing "$msec $request_time" always;
location /lr/  { limit_req zone=lr burst=5 delay=2; alias $TEST_NGINX_HTML_DIR/; }
location /th/  { throttle zone=th delay=2;           alias $TEST_NGINX_HTML_DIR/; }
location /lr0/ { limit_req zone=lr0 burst=5;         alias $TEST_NGINX_HTML_DIR/; }
location /th0/ { throttle zone=th0 delay=0;          alias $TEST_NGINX_HTML_DIR/; }
--- requests
perl {
    # [offset (s), requests]: bursts beyond burst + 1, bursts into a
    # funnel part full, and requests on their own, late and early
    my @groups = ([0, 8], [0.85, 1], [0.9, 6], [1.3, 1], [1.55, 1],
                  [1.6, 2], [2.5, 3]);
    my @res = Timeline::fire($nginx->{port}, [
        Timeline::groups(\@groups, [qw(lr th lr0 th0)], 'X-Key' => 'k')]);
    Timeline::same_outcomes("$name (delay=2)", \@res, 'lr', 'th', tolerance());
    Timeline::same_outcomes("$name (delay=0)", \@res, 'lr0', 'th0', tolerance());

    # the first burst, by the rule: delay + 1 at once, then one every T,
    # burst + 1 in all
    my @first = Timeline::outcome(\@res, 0, 'th');
    statuses_are($name, 'first burst, delay=2', [sort { $b->{status} <=> $a->{status} } @first],
                 '429 x2', '200 x6');
    waits_are($name, 'first burst, delay=2', [grep { $_->{status} == 200 } @first],
              0, 0, 0, 100, 200, 300);
    waits_are($name, 'first burst, delay=0',
              [grep { $_->{status} == 200 } Timeline::outcome(\@res, 0, 'th0')],
              0, 100, 200, 300, 400, 500);
}



=== TEST 2: without delay=, nothing waits (nor with a delay of burst or more)
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=y:1m rate=10r/s burst=5;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Status $throttle_status always;
add_header X-Delay $throttle_delay always;
location /none/ { throttle zone=z;          alias $TEST_NGINX_HTML_DIR/; }
location /big/  { throttle zone=y delay=5;  alias $TEST_NGINX_HTML_DIR/; }
--- requests
perl {
    for my $uri ('/none/a.txt', '/big/a.txt') {
        my @res = burst($nginx->{port}, 7, $uri, 'k');
        statuses_are($name, $uri, [sort { $a->{status} <=> $b->{status} } @res],
                     '200 x6', 429);
        waits_are($name, $uri, [grep { $_->{status} == 200 } @res], (0) x 6);
        header_values_are($name, $uri, [grep { $_->{status} == 200 } @res],
                          'X-Status', ('PASSED') x 6);
        header_values_are($name, $uri, \@res, 'X-Delay', (0) x 7);
    }
}
--- no_error_log
delaying request



=== TEST 3: $throttle_status DELAYED and $throttle_delay, the wait in ms; with cost=, the units ahead count
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=c:1m rate=10r/s burst=5;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Status $throttle_status always;
add_header X-Delay $throttle_delay always;
add_header X-Remaining $throttle_remaining always;
location /z/    { throttle zone=z delay=2;        alias $TEST_NGINX_HTML_DIR/; }
location /cost/ { throttle zone=c cost=2 delay=1; alias $TEST_NGINX_HTML_DIR/; }
location /free/ { alias $TEST_NGINX_HTML_DIR/; }
--- requests
perl {
    my @res = burst($nginx->{port}, 8, '/z/a.txt', 'k');
    my @passed = grep { $_->{status} == 200 } @res;
    waits_are($name, 'delay=2', \@passed, 0, 0, 0, 100, 200, 300);
    header_values_are($name, 'delay=2', \@passed, 'X-Status',
                      ('PASSED') x 3, ('DELAYED') x 3);
    header_values_are($name, 'delay=2', \@passed, 'X-Delay',
                      0, 0, 0, '~100', '~200', '~300');
    header_values_are($name, 'delay=2', [grep { $_->{status} == 429 } @res],
                      'X-Delay', 0, 0);
    header_values_are($name, 'delay=2', [grep { $_->{status} == 429 } @res],
                      'X-Status', 'REJECTED', 'REJECTED');

    # cost 2, delay=1: a request goes at once while at most one unit is
    # ahead of it: 2 units ahead wait one T, 4 units three T
    @res = burst($nginx->{port}, 4, '/cost/a.txt', 'k');
    @passed = grep { $_->{status} == 200 } @res;
    waits_are($name, 'cost=2 delay=1', \@passed, 0, 100, 300);
    header_values_are($name, 'cost=2 delay=1', \@passed, 'X-Delay',
                      0, '~100', '~300');
    header_values_are($name, "cost=2 delay=1", \@passed, "X-Remaining", 4, 2, 0);

    # where no throttle applies, $throttle_delay is empty, as the others
    my $r = request('/free/a.txt', 'X-Key' => 'k');
    is(header($r, 'X-Delay'), undef, "$name: no throttle line: no X-Delay");
    $r = request('/z/a.txt');
    is(header($r, 'X-Delay'), undef, "$name: an empty key: no X-Delay");
}
--- error_log
~ \[warn\] .*delaying request by \d+ ms by zone "z"
~ \[warn\] .*delaying request by \d+ ms by zone "c"



=== TEST 4: a dry run does not wait: DELAYED_DRY_RUN, and $throttle_delay the wait it would have had
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
--- config
location / {
    add_header X-Timing "$msec $request_time" always;
    throttle zone=z delay=2;
    throttle_dry_run on;
    throttle_log_level info;
    add_header X-Status $throttle_status always;
    add_header X-Delay $throttle_delay always;
}
--- requests
perl {
    my @res = burst($nginx->{port}, 8, '/a.txt', 'k');
    statuses_are($name, 'dry run', \@res, '200 x8');
    waits_are($name, 'dry run', \@res, (0) x 8);
    my %status;
    $status{ $_->{headers}{'x-status'} }++ for @res;
    is_deeply(\%status, { PASSED => 3, DELAYED_DRY_RUN => 3,
                          REJECTED_DRY_RUN => 2 },
              "$name: 3 pass, 3 would wait, 2 would be rejected");
    my @would = sort { $a->{headers}{'x-delay'} <=> $b->{headers}{'x-delay'} }
                grep { $_->{headers}{'x-status'} eq 'DELAYED_DRY_RUN' } @res;
    header_values_are($name, 'dry run', \@would, 'X-Delay', '~100', '~200', '~300');
}
--- error_log
~ \[info\] .*delaying request by \d+ ms by zone "z" \(dry run\)



=== TEST 5: several zones: the request waits the longest of their waits; the log names that zone
--- http_config
throttle_zone $http_x_key zone=a:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=b:1m rate=5r/s burst=5;
--- config
location / {
    add_header X-Timing "$msec $request_time" always;
    throttle zone=a delay=0;
    throttle zone=b delay=1;
    add_header X-Delay $throttle_delay always;
}
--- requests
perl {
    # a: 0, 100, 200, 300 ms; b (T = 200 ms, one unit may be ahead): 0, 0,
    # 200, 400 ms
    my @res = burst($nginx->{port}, 4, '/a.txt', 'k');
    statuses_are($name, 'two zones', \@res, '200 x4');
    waits_are($name, 'two zones', \@res, 0, 100, 200, 400);
    header_values_are($name, 'two zones', \@res, 'X-Delay',
                      0, '~100', '~200', '~400');
}
--- error_log
~ delaying request by \d+ ms by zone "a"
~ delaying request by \d+ ms by zone "b"



=== TEST 6: a delayed request is counted and delayed once across internal redirects (error_page, try_files)
--- http_config
throttle_zone $http_x_key zone=z:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=y:1m rate=10r/s burst=5;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Delay $throttle_delay always;
add_header X-Remaining $throttle_remaining always;
location /e/ {
    throttle zone=z delay=0;
    error_page 404 = /fallback/a.txt;
}
location /fallback/ {
    throttle zone=z delay=0;
    alias $TEST_NGINX_HTML_DIR/;
}
location /t/ {
    throttle zone=y delay=0;
    try_files $uri @named;
}
location @named {
    throttle zone=y delay=0;
    try_files /b.txt =404;
}
--- requests
perl {
    for my $uri ('/e/missing.txt', '/t/missing.txt') {
        my @res = burst($nginx->{port}, 3, $uri, 'k');
        statuses_are($name, $uri, \@res, '200 x3');
        waits_are($name, $uri, \@res, 0, 100, 200);
        header_values_are($name, $uri, \@res, 'X-Delay', 0, '~100', '~200');
        header_values_are($name, $uri, \@res, 'X-Remaining', 5, 4, 3);
    }
}



=== TEST 7: phase=authorized delays too; $throttle_delay adds up the phases' waits
--- http_config
throttle_zone $http_x_key zone=p:1m rate=10r/s burst=5;
throttle_zone $http_x_key zone=a:1m rate=5r/s burst=5;
--- config
add_header X-Timing "$msec $request_time" always;
add_header X-Delay $throttle_delay always;
location /auth/ {
    throttle zone=a phase=authorized delay=0;
    alias $TEST_NGINX_HTML_DIR/;
}
location /both/ {
    throttle zone=p delay=0;
    throttle zone=a phase=authorized delay=0;
    alias $TEST_NGINX_HTML_DIR/;
}
--- requests
perl {
    my @res = burst($nginx->{port}, 3, '/auth/a.txt', 'k1');
    waits_are($name, 'authorized', \@res, 0, 200, 400);
    header_values_are($name, 'authorized', \@res, 'X-Delay', 0, '~200', '~400');

    # preaccess lets them go 100 ms apart, authorized (T = 200 ms) spaces
    # them further: 0 + 0, 100 + 100, 200 + 200
    @res = burst($nginx->{port}, 3, '/both/a.txt', 'k2');
    waits_are($name, 'both phases', \@res, 0, 200, 400);
    header_values_are($name, 'both phases', \@res, 'X-Delay', 0, '~200', '~400');
}



=== TEST 8: a client that goes away while its request waits: the request ends then, logged 499, as limit_req's
--- http_config
limit_req_zone $http_x_key zone=lr:1m rate=1r/m;
throttle_zone $http_x_key zone=th:1m rate=1r/m burst=5;
log_format delay '$uri $status $request_time $throttle_status';
--- config
access_log $TEST_NGINX_PREFIX/logs/access.log delay;
location /lr/ { limit_req zone=lr burst=5; alias $TEST_NGINX_HTML_DIR/; }
location /th/ { throttle zone=th delay=0;  alias $TEST_NGINX_HTML_DIR/; }
--- requests
GET /lr/a.txt => 200
  > X-Key: k
GET /th/a.txt => 200
  > X-Key: k
perl {
    # the next request of each waits a minute
    my @socks = map {
        my $s = ThrottleTest::connect_to($nginx) or die "connect: $!";
        syswrite $s, "GET /$_/a.txt HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n"
                   . "Connection: close\r\n\r\n";
        $s;
    } qw(lr th);
    ok(all_read(), "$name: both requests wait");
    sleep 0.2;
    close $_ for @socks;
    my $log = "$nginx->{prefix}/logs/access.log";
    ok(wait_until(2, sub { Processes::read_file($log) =~ m{^/th/a\.txt 499}m
                               && Processes::read_file($log) =~ m{^/lr/a\.txt 499}m }),
       "$name: both are logged 499 soon after the close")
        or diag(Processes::read_file($log));
    my ($time) = Processes::read_file($log) =~ m{^/th/a\.txt 499 ([\d.]+) DELAYED$}m;
    ok(defined $time && $time < 5, "$name: it ended long before its minute was over")
        or diag(Processes::read_file($log));
    ok(all_closed(), "$name: nothing is left open");
}
GET /th/a.txt => 200
  > X-Key: other



=== TEST 9: nginx -s quit while requests wait: they finish, then nginx exits
--- http_config
throttle_zone $http_x_key zone=z:1m rate=5r/s burst=5;
--- config
location / {
    add_header X-Timing "$msec $request_time" always;
    throttle zone=z delay=0;
}
--- requests
perl: quit_while_waiting($name, $nginx);



=== TEST 10: nginx -s reload (its SIGHUP) while requests wait: they finish; the new workers delay as the zone says
--- http_config
throttle_zone $http_x_key zone=z:1m rate=5r/s burst=5;
--- config
location / {
    add_header X-Timing "$msec $request_time" always;
    throttle zone=z delay=0;
    add_header X-Delay $throttle_delay always;
}
--- requests
perl {
    # The reload is the SIGHUP that nginx -s reload sends the master, sent
    # from the timeline (as quit_while_waiting sends SIGQUIT): a run step
    # holds the timeline's reading back while it runs, and nginx -s reload
    # parses the whole configuration first, which took 200 to 350 ms with
    # the sanitizers on a loaded machine: the response due at 200 ms was
    # then read, and timed, that much late.
    my $master = $nginx->{master};
    my @old = Processes::children_of($master);
    my @res = burst($nginx->{port}, 4, '/a.txt', 'k', 0.1, sub {
        ok(kill('HUP', $master), "$name: SIGHUP to the master");
    });
    statuses_are($name, 'reload', \@res, '200 x4');
    waits_are($name, 'reload', \@res, 0, 200, 400, 600);
    ok(wait_until(5, sub { !grep { Processes::alive($_) } @old }),
       "$name: the old workers have exited");
    my %old = map { $_ => 1 } @old;
    is(scalar(grep { !$old{$_} } Processes::children_of($master)), 2,
       "$name: two new workers in their place");
    @res = burst($nginx->{port}, 3, '/a.txt', 'fresh');
    waits_are($name, 'after the reload', \@res, 0, 200, 400);
}
