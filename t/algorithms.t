# SPDX-License-Identifier: BSD-2-Clause
# The window algorithms of local zones (algorithm=fixed_window,
# sliding_window, sliding_log): the boundary burst that tells them apart,
# exact headers, cost, several zones, dry run, variables, memory, reload,
# empty keys. Semantics: docs/algorithms.md.
#
# Windows are the rate's unit aligned on the wall clock (UTC). Blocks whose
# expected values depend on where "now" falls in a window compute them from
# time() in perl steps, and first wait out the last seconds of a window
# (window_guard) so that a block never straddles two. Zones whose values
# should not depend on the clock count per hour (r/h: guarded the same way)
# or are sliding_logs (whose window starts at each entry). Blocks that need
# a timing (a phase of the second, a pause) retry with a fresh key when the
# machine was too slow to keep it, rather than relax what they check.

use Responses ();
use SlidingWindow;
use ThrottleTest;

package ThrottleTest::Step;

use POSIX qw(floor fmod);

sub now_us { int(time() * 1e6) }

# As the module rounds seconds up (throttle::ceil_seconds).
sub ceil_s {
    my ($us) = @_;
    return $us <= 0 ? 0 : int(($us + 999_999) / 1_000_000);
}

# Sleeps past the end of the current window of $period seconds if less than
# $margin seconds of it are left.
sub window_guard {
    my ($period, $margin) = @_;
    my $left = $period - fmod(time(), $period);
    sleep($left + 0.02) if $left < $margin;
}

# Sleeps until the next instant whose offset in a second is $at; returns
# time() after the sleep.
sub wait_phase {
    my ($at) = @_;
    my $d = $at - fmod(time(), 1);
    $d += 1 if $d < 0;
    sleep($d);
    return time();
}

# One request, with the wall clock (us) before it was sent and after its
# response was read: the module decided somewhere in between.
sub timed {
    my ($uri, $key) = @_;
    my $t0 = now_us();
    my $res = request("GET $uri", 'X-Key' => $key);
    my $t1 = now_us();
    return ($res, $t0, $t1);
}

# R and T of the RateLimit header "zone";r=R;t=T; () for another zone.
sub ratelimit {
    my ($res, $zone) = @_;
    my ($name, @rt) = Responses::ratelimit_of($res);
    return defined $name && $name eq $zone ? @rt : ();
}

sub between {
    my ($got, $lo, $hi, $label) = @_;
    ($lo, $hi) = ($hi, $lo) if $lo > $hi;
    my $ok = defined $got && $got =~ /^\d+$/ && $got >= $lo && $got <= $hi;
    my $want = $lo == $hi ? $lo : "$lo..$hi";
    ok($ok, "$label: " . ($got // 'undef') . " (expected $want)");
    return $ok;
}

# fixed_window: 5 requests at .70-.80 of a second and 5 more at .03-.10 of
# the next, on the three locations (same key, a zone each); interleaved so
# that all three see the same instants. Returns the outcome, or a reason
# why the timing could not be kept.
sub boundary_burst {
    my ($key) = @_;
    my @algs = qw(fw sw sl);
    my %r = map { $_ => [[], []] } @algs;

    my $t = wait_phase(0.70);
    my $sec = int($t);
    return { late => sprintf('batch 1 began at +%.3f s', $t - $sec) }
        if $t - $sec >= 0.80;
    for my $i (1 .. 5) {
        push @{ $r{$_}[0] }, request("GET /$_.txt", 'X-Key' => $key) for @algs;
    }
    my $end1 = time();
    return { late => sprintf('batch 1 ended at +%.3f s', $end1 - $sec) }
        if $end1 >= $sec + 1;

    my $d = $sec + 1.03 - time();
    sleep($d) if $d > 0;
    my $t2 = time();
    return { late => sprintf('batch 2 began at +%.3f s', $t2 - $sec) }
        if $t2 >= $sec + 1.10;
    for my $i (1 .. 5) {
        push @{ $r{$_}[1] }, request("GET /$_.txt", 'X-Key' => $key) for @algs;
    }
    my $end2 = time();
    # with 5 units in the previous second, the sliding_window fits one
    # more only from .2 of this one on
    return { late => sprintf('batch 2 ended at +%.3f s', $end2 - $sec) }
        if $end2 >= $sec + 1.20;

    return { res => \%r, span => $end2 - $t };
}

package main;

run_blocks();

__DATA__

=== TEST 1: the boundary burst: fixed_window admits twice its rate across a second boundary, the sliding ones do not
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=5r/s algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=5r/s algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=5r/s algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
perl {
    my ($out, @late);
    for my $attempt (1 .. 5) {
        # a fresh key each time: an attempt that overran left state
        $out = boundary_burst("attempt-$attempt");
        last unless $out->{late};
        push @late, $out->{late};
    }
    diag("timing overrun, retried: @late") if @late;
    unless (ok(!$out->{late}, "$name: the timing windows held in one of 5 attempts")) {
        return;
    }
    my %r = %{ $out->{res} };
    my $span = sprintf '%.2f', $out->{span};
    my %n;
    for my $alg (keys %r) {
        for my $b (0, 1) {
            $n{$alg}[$b] = grep { ($_->{status} // 0) == 200 } @{ $r{$alg}[$b] };
        }
    }
    for my $alg (qw(fw sw sl)) {
        is($n{$alg}[0], 5, "$name: $alg: batch 1 (.70-.80 s): $n{$alg}[0] of 5 admitted");
    }
    is($n{fw}[0] + $n{fw}[1], 10,
       "$name: fixed_window admitted " . ($n{fw}[0] + $n{fw}[1])
       . " of 10 within $span s: twice its 5r/s across the boundary");
    is($n{sw}[1], 0, "$name: sliding_window admitted $n{sw}[1] of 5 of batch 2 (.03-.20 s)");
    is($n{sl}[1], 0, "$name: sliding_log admitted $n{sl}[1] of 5 of batch 2 (.03-.20 s)");

    # fixed_window's counter starts afresh in the new second
    my @fw = map { join ';', ratelimit($_, 'fw') } @{ $r{fw}[1] };
    is("@fw", '4;1 3;1 2;1 1;1 0;1', "$name: fixed_window batch 2 RateLimit r;t: @fw");
    # the sliding ones: back within the second (sliding_window from .2 on,
    # sliding_log when the first entry leaves at .7-.8)
    for my $alg (qw(sw sl)) {
        for my $res (@{ $r{$alg}[1] }) {
            is(header($res, 'Retry-After'), 1, "$name: $alg batch 2: Retry-After: 1");
        }
    }
}



=== TEST 2: sliding_log 3r/m: exact headers, Retry-After when the oldest entry leaves
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
throttle_zone $http_x_key zone=slb:1m rate=3r/m burst=2 algorithm=sliding_log;
--- config
location / {
    throttle zone=sl;
}
location = /b.txt {
    throttle zone=slb;
}
location = /index.html {
    throttle zone=sl;
    throttle_headers legacy;
}
--- requests
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "sl";q=3;w=60
  RateLimit: "sl";r=2;t=60
  no Retry-After
GET /a.txt => 200
  > X-Key: alice
  RateLimit: "sl";r=1;t=60
GET /a.txt => 200
  > X-Key: alice
  RateLimit-Policy: "sl";q=3;w=60
  RateLimit: "sl";r=0;t=60
  no Retry-After
GET /a.txt x3 => 429
  > X-Key: alice
  Retry-After: 60
  RateLimit-Policy: "sl";q=3;w=60
  RateLimit: "sl";r=0;t=60
# keys are independent
GET /a.txt => 200
  > X-Key: bob
  RateLimit: "sl";r=2;t=60
# burst adds to the limit: 3 + 2
GET /b.txt x5 => 200
  > X-Key: alice
  RateLimit-Policy: "slb";q=5;w=60
GET /b.txt => 429
  > X-Key: alice
  Retry-After: 60
  RateLimit: "slb";r=0;t=60
# legacy fields
GET /index.html x3 => 200
  > X-Key: carol
  X-RateLimit-Limit: 3
  X-RateLimit-Reset: 60
  no RateLimit
GET /index.html => 429
  > X-Key: carol
  X-RateLimit-Limit: 3
  X-RateLimit-Remaining: 0
  X-RateLimit-Reset: 60
  Retry-After: 60
--- error_log
~ \[error\] .*throttled by zone "sl", retry after (59\d{3}|60000) ms



=== TEST 3: sliding_log: an entry leaves the window W after it was recorded
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=2r/s algorithm=sliding_log;
--- config
location / {
    throttle zone=sl;
}
--- requests
perl {
    # entries at t=0 and t=~0.4: the third request fits once the first has
    # left (t=1), the fourth once the second has (t=~1.4)
    my ($got, @late);
    for my $attempt (1 .. 3) {
        my $key = "try$attempt";
        my ($r1, $a0, $a1) = timed('/a.txt', $key);
        sleep(0.4);
        my ($r2, $b0, $b1) = timed('/a.txt', $key);
        my ($r3, $c0, $c1) = timed('/a.txt', $key);
        # the third must come before the first entry leaves
        if ($c1 >= $a0 + 1e6) {
            push @late, "$key: the third request too late";
            next;
        }
        # once the first entry has left (it was recorded by $a1), one
        # request fits, the next does not
        my $d = $a1 + 1e6 - now_us();
        sleep($d / 1e6 + 0.03) if $d > -30000;
        my $r4 = request('GET /a.txt', 'X-Key' => $key);
        my $r5 = request('GET /a.txt', 'X-Key' => $key);
        # the second entry leaves at ~1.4 s: r5 must come before
        if (now_us() >= $b0 + 0.95e6) {
            push @late, "$key: too slow";
            next;
        }
        $got = [$r1, $r2, $r3, $r4, $r5, $b0, $b1, $c0, $c1];
        last;
    }
    diag("retried: @late") if @late;
    ok($got, "$name: the timing held in one of 3 attempts") or return;
    my ($r1, $r2, $r3, $r4, $r5, $b0, $b1, $c0, $c1) = @$got;
    is("$r1->{status} $r2->{status} $r3->{status}", '200 200 429',
       "$name: 2 pass, the third is rejected");
    is(header($r3, 'Retry-After'), 1, "$name: Retry-After: 1");
    my ($r, $t) = ratelimit($r3, 'sl');
    is($r, 0, "$name: r=0");
    # t: the newest entry (at b0..b1) leaves the window at b + 1 s
    between($t, ceil_s($b0 + 1e6 - $c1), ceil_s($b1 + 1e6 - $c0), "$name: t");
    is("$r4->{status} $r5->{status}", '200 429',
       "$name: after the first entry left: one passes, the next is rejected");
    is(join(';', ratelimit($r4, 'sl')), '0;1', "$name: r=0;t=1 after it");
}



=== TEST 4: sliding_log: a rejection waits for the (count + cost - limit)-th oldest entry, to the millisecond
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
--- config
location / {
    throttle zone=sl cost=$arg_cost;
}
--- requests
perl {
    # entries at ~0, ~0.15 and ~0.3 s
    my @ts;
    for my $i (1 .. 3) {
        my ($res, $t0, $t1) = timed("/a.txt?cost=1&n=entry$i", 'k');
        is($res->{status}, 200, "$name: entry $i admitted");
        push @ts, [$t0, $t1];
        sleep(0.15) if $i < 3;
    }
    for my $cost (1, 2, 3) {
        my ($res, $t0, $t1) = timed("/a.txt?cost=$cost&n=retry$cost", 'k');
        is($res->{status}, 429, "$name: cost $cost rejected");
        # count 3 + cost - limit 3: the cost-th oldest entry must leave
        # (+-1 us: the client's clock is read truncated)
        my ($lo, $hi) = ($ts[$cost - 1][0] + 60e6 - $t1 - 1, $ts[$cost - 1][1] + 60e6 - $t0 + 1);
        my ($ms) = error_log() =~ /retry after (\d+) ms, client: .*n=retry$cost /;
        between($ms, POSIX::ceil($lo / 1000), POSIX::ceil($hi / 1000),
                "$name: cost $cost: logged retry (ms) = entry $cost + 60 s - now");
        is(header($res, 'Retry-After'), ceil_s($ms * 1000), "$name: cost $cost: Retry-After");
    }
}



=== TEST 5: sliding_log: the ring of entries wraps around as entries leave and come
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/s algorithm=sliding_log;
--- config
location / {
    throttle zone=sl cost=$arg_cost;
}
--- requests
perl {
    my @steps = (
        # [offset from the start (s), cost, status, remaining]
        [0,    2, 200, 1],
        [0,    1, 200, 0],
        [0,    1, 429, 0],
        # the three entries have left; the new ones wrap around the 3 slots
        [1.05, 3, 200, 0],
        [1.05, 1, 429, 0],
        [2.10, 1, 200, 2],
        [2.30, 1, 200, 1],
        [2.50, 2, 429, 1],
        [2.50, 1, 200, 0],
        # the entry of 2.10 has left, those of 2.30 and 2.50 not
        [3.15, 2, 429, 1],
        [3.15, 1, 200, 0],
        [3.15, 1, 429, 0],
    );
    my ($got, @late);
    for my $attempt (1 .. 6) {
        my $key = "try$attempt";
        my $start = time();
        my @res;
        for my $s (@steps) {
            my $d = $start + $s->[0] - time();
            sleep($d) if $d > 0;
            my $res = request("GET /a.txt?cost=$s->[1]", 'X-Key' => $key);
            push @res, "$res->{status} r=" . ((ratelimit($res, 'sl'))[0] // '?');
            # the expectations hold while every step is at most .05 s late:
            # the schedule leaves .05 s between an entry's leaving and the
            # step that must find it gone, and an entry recorded late
            # leaves as late
            my $late = time() - $start - $s->[0];
            if ($late > 0.05) {
                push @late, sprintf('%s step %d %.3f s late', $key, scalar @res, $late);
                @res = ();
                last;
            }
        }
        if (@res) {
            $got = \@res;
            last;
        }
    }
    diag("retried: @late") if @late;
    ok($got, "$name: the timing held in one of 6 attempts") or return;
    my $i = 0;
    for my $s (@steps) {
        my ($at, $cost, $status, $r) = @$s;
        is($got->[$i++], "$status r=$r", sprintf('%s: step %d (+%.2f s, cost %d)', $name, $i, $at, $cost));
    }
}



=== TEST 6: fixed_window 3r/m: Retry-After and t are the seconds to the end of the UTC minute (hour, day)
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=3r/m algorithm=fixed_window;
throttle_zone $http_x_key zone=fwh:1m rate=3r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=fwd:1m rate=3r/d algorithm=fixed_window;
--- config
location / {
    throttle zone=fw;
}
location = /b.txt {
    throttle zone=fwh;
}
location = /index.html {
    throttle zone=fwd;
}
--- requests
perl {
    window_guard(60, 1.5);
    for my $i (1 .. 5) {
        my ($res, $t0, $t1) = timed('/a.txt', 'alice');
        my $end = ($t0 - $t0 % 60_000_000) + 60_000_000;
        my ($lo, $hi) = (ceil_s($end - $t1), ceil_s($end - $t0));
        my $want = $i <= 3 ? 200 : 429;
        is($res->{status}, $want, "$name: request $i: $want");
        is(header($res, 'RateLimit-Policy'), '"fw";q=3;w=60',
           "$name: request $i: RateLimit-Policy");
        my ($r, $t) = ratelimit($res, 'fw');
        is($r, $i <= 3 ? 3 - $i : 0, "$name: request $i: r");
        between($t, $lo, $hi, "$name: request $i: t = seconds to the minute's end");
        if ($i <= 3) {
            ok(!defined header($res, 'Retry-After'), "$name: request $i: no Retry-After");
        } else {
            between(header($res, 'Retry-After'), $lo, $hi,
                    "$name: request $i: Retry-After = seconds to the minute's end");
        }
    }
    # hours and days are aligned on UTC too
    for my $z (['fwh', '/b.txt', 3600, 'hour'], ['fwd', '/index.html', 86400, 'UTC day']) {
        my ($zone, $uri, $w, $what) = @$z;
        my ($res, $t0, $t1) = timed($uri, 'alice');
        my $end = ($t0 - $t0 % ($w * 1e6)) + $w * 1e6;
        is(header($res, 'RateLimit-Policy'), "\"$zone\";q=3;w=$w", "$name: $zone: RateLimit-Policy");
        my ($r, $t) = ratelimit($res, $zone);
        is($r, 2, "$name: $zone: r");
        between($t, ceil_s($end - $t1), ceil_s($end - $t0), "$name: $zone: t = seconds to the ${what}'s end");
    }
}



=== TEST 7: sliding_window 3r/m from a fresh key: r = floor(limit - weighted - cost), t to the end of the next minute, Retry-After when the weight allows
--- http_config
throttle_zone $http_x_key zone=sw:1m rate=3r/m algorithm=sliding_window;
--- config
location / {
    throttle zone=sw;
}
--- requests
perl {
    window_guard(60, 1.5);
    for my $i (1 .. 5) {
        my ($res, $t0, $t1) = timed('/a.txt', 'alice');
        my $start = $t0 - $t0 % 60_000_000;
        my $want = $i <= 3 ? 200 : 429;
        is($res->{status}, $want, "$name: request $i: $want");
        is(header($res, 'RateLimit-Policy'), '"sw";q=3;w=60',
           "$name: request $i: RateLimit-Policy");
        my ($r, $t) = ratelimit($res, 'sw');
        is($r, $i <= 3 ? 3 - $i : 0, "$name: request $i: r");
        # the units counted now weigh on the next minute too
        between($t, ceil_s($start + 120e6 - $t1), ceil_s($start + 120e6 - $t0),
                "$name: request $i: t = seconds to the end of the next minute");
        if ($i > 3) {
            # next minute, 3 units weigh 3 * (60 - e) / 60; one more fits
            # from e = 20 s on
            between(header($res, 'Retry-After'), ceil_s($start + 80e6 - $t1),
                    ceil_s($start + 80e6 - $t0),
                    "$name: request $i: Retry-After = 20 s into the next minute");
        }
    }
}



=== TEST 8: sliding_window 10r/s: the previous second weighs by the time left of it; every header as t/lib/SlidingWindow.pm computes it, in the same doubles
--- http_config
throttle_zone $http_x_key zone=sw:1m rate=10r/s algorithm=sliding_window;
--- config
location / {
    throttle zone=sw;
}
--- requests
perl {
    # 6 units at ~.3 of a second, then requests from ~.55 of the next:
    # they weigh 6 * (1 - e), e.g. 2.7 at e = .55, so 7 more pass and
    # r = floor(10 - 2.7 - cur - 1) is fractional before flooring.
    my ($result, @retried);
    ATTEMPT: for my $attempt (1 .. 5) {
        my $key = "try$attempt";
        my $st = [0, 0, 0];
        my @checks;
        my $t = wait_phase(0.30);
        my $sec = int($t);
        my ($p1, $p2) = (0, 0);
        for my $phase (1, 2) {
            if ($phase == 2) {
                my $d = $sec + 1.55 - time();
                sleep($d) if $d > 0;
            }
            my $first = time();
            my $rejected = 0;
            for my $i (1 .. ($phase == 1 ? 6 : 12)) {
                my ($res, $t0, $t1) = timed('/a.txt', $key);
                my $m0 = SlidingWindow::decide($st, $t0, 1_000_000, 10, 1);
                my $m1 = SlidingWindow::decide($st, $t1, 1_000_000, 10, 1);
                if (int($t0 / 1e6) != int($t1 / 1e6) || $m0->{limited} != $m1->{limited}) {
                    # a window or threshold crossed during the request:
                    # the model cannot say which side the module saw
                    push @retried, "$key: request crossed a boundary";
                    next ATTEMPT;
                }
                push @checks, [$phase, $i, $res, $m0, $m1];
                $st = $m0->{state} unless $m0->{limited};
                $phase == 1 ? $p1++ : $p2++ unless $m0->{limited};
                last if $m0->{limited} && ++$rejected == 2;
            }
            my $lo = $phase == 1 ? 0.30 : 0.55;
            my $off = $first - $sec - ($phase - 1);
            if ($off < $lo || $off >= $lo + 0.1 || time() - $sec - ($phase - 1) >= $lo + 0.10) {
                push @retried, sprintf('%s: phase %d at +%.3f s', $key, $phase, $off);
                next ATTEMPT;
            }
        }
        $result = { checks => \@checks, p1 => $p1, p2 => $p2 };
        last;
    }
    diag("retried: @retried") if @retried;
    ok($result, "$name: the timing held in one of 5 attempts") or return;

    is($result->{p1}, 6, "$name: model: 6 pass in the first second");
    is($result->{p2}, 7, "$name: model: 7 pass from .55 of the next (6 weighing 2.1-2.7)");
    for my $c (@{ $result->{checks} }) {
        my ($phase, $i, $res, $m0, $m1) = @$c;
        my $label = "$name: second $phase request $i";
        is($res->{status}, $m0->{limited} ? 429 : 200, "$label: status");
        my ($r, $t) = ratelimit($res, 'sw');
        between($r, $m0->{remaining}, $m1->{remaining}, "$label: r");
        between($t, ceil_s($m1->{reset}), ceil_s($m0->{reset}), "$label: t");
        if ($m0->{limited}) {
            between(header($res, 'Retry-After'), ceil_s($m1->{retry}),
                    ceil_s($m0->{retry}), "$label: Retry-After");
        } else {
            ok(!defined header($res, 'Retry-After'), "$label: no Retry-After");
        }
    }
}



=== TEST 9: cost with each algorithm: cost=2 spends 2, a rejection charges nothing, a cost above the limit never fits and gets no Retry-After, cost=0 never charges
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=5r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=5r/h algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=5r/m algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
add_header X-Status $throttle_status always;
add_header X-Retry-After $throttle_retry_after always;
location = /fw.txt {
    throttle zone=fw cost=$arg_cost;
}
location = /sw.txt {
    throttle zone=sw cost=$arg_cost;
}
location = /sl.txt {
    throttle zone=sl cost=$arg_cost;
}
--- requests
perl: window_guard(3600, 2);
# cost=0 on a fresh key reports a fresh key and stores nothing
GET /fw.txt?cost=0 x2 => 200
  > X-Key: c
  X-Status: PASSED
  RateLimit-Policy: "fw";q=5;w=3600
  RateLimit: "fw";r=5;t=0
GET /sw.txt?cost=0 x2 => 200
  > X-Key: c
  X-Status: PASSED
  RateLimit-Policy: "sw";q=5;w=3600
  RateLimit: "sw";r=5;t=0
GET /sl.txt?cost=0 x2 => 200
  > X-Key: c
  X-Status: PASSED
  RateLimit-Policy: "sl";q=5;w=60
  RateLimit: "sl";r=5;t=0
# fixed_window
GET /fw.txt?cost=2 => 200
  > X-Key: c
  RateLimit ~ ^"fw";r=3;t=\d+$
GET /fw.txt?cost=0 => 200
  > X-Key: c
  RateLimit ~ ^"fw";r=3;t=\d+$
GET /fw.txt?cost=2 => 200
  > X-Key: c
  RateLimit ~ ^"fw";r=1;t=\d+$
GET /fw.txt?cost=2 x2 => 429
  > X-Key: c
  X-Status: REJECTED
  Retry-After ~ ^\d+$
  RateLimit ~ ^"fw";r=1;t=\d+$
GET /fw.txt?cost=6 => 429
  > X-Key: c
  X-Status: REJECTED
  X-Retry-After: 0
  no Retry-After
  RateLimit ~ ^"fw";r=1;t=\d+$
GET /fw.txt?cost=1 => 200
  > X-Key: c
  RateLimit ~ ^"fw";r=0;t=\d+$
# a zero cost fits even when nothing remains
GET /fw.txt?cost=0 => 200
  > X-Key: c
  no Retry-After
  RateLimit ~ ^"fw";r=0;t=\d+$
GET /fw.txt?cost=1 => 429
  > X-Key: c
  Retry-After ~ ^\d+$
# sliding_window (no previous window: r = floor(5 - cur - cost))
GET /sw.txt?cost=2 => 200
  > X-Key: c
  RateLimit ~ ^"sw";r=3;t=\d+$
GET /sw.txt?cost=0 => 200
  > X-Key: c
  RateLimit ~ ^"sw";r=3;t=\d+$
GET /sw.txt?cost=2 => 200
  > X-Key: c
  RateLimit ~ ^"sw";r=1;t=\d+$
GET /sw.txt?cost=2 x2 => 429
  > X-Key: c
  X-Status: REJECTED
  Retry-After ~ ^\d+$
  RateLimit ~ ^"sw";r=1;t=\d+$
GET /sw.txt?cost=6 => 429
  > X-Key: c
  X-Status: REJECTED
  X-Retry-After: 0
  no Retry-After
  RateLimit ~ ^"sw";r=1;t=\d+$
GET /sw.txt?cost=1 => 200
  > X-Key: c
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /sw.txt?cost=0 => 200
  > X-Key: c
  no Retry-After
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /sw.txt?cost=1 => 429
  > X-Key: c
  Retry-After ~ ^\d+$
# sliding_log: exact
GET /sl.txt?cost=2 => 200
  > X-Key: c
  RateLimit: "sl";r=3;t=60
GET /sl.txt?cost=0 => 200
  > X-Key: c
  RateLimit: "sl";r=3;t=60
GET /sl.txt?cost=2 => 200
  > X-Key: c
  RateLimit: "sl";r=1;t=60
# 4 entries + 2 > 5: it fits once the oldest entry has left, in 60 s
GET /sl.txt?cost=2 x2 => 429
  > X-Key: c
  X-Status: REJECTED
  Retry-After: 60
  X-Retry-After: 60
  RateLimit: "sl";r=1;t=60
GET /sl.txt?cost=6 => 429
  > X-Key: c
  X-Status: REJECTED
  X-Retry-After: 0
  no Retry-After
  RateLimit: "sl";r=1;t=60
GET /sl.txt?cost=1 => 200
  > X-Key: c
  RateLimit: "sl";r=0;t=60
GET /sl.txt?cost=0 => 200
  > X-Key: c
  no Retry-After
  RateLimit: "sl";r=0;t=60
GET /sl.txt?cost=1 => 429
  > X-Key: c
  Retry-After: 60
--- error_log
throttled by zone "fw": cost exceeds the zone's limit of 5
throttled by zone "sw": cost exceeds the zone's limit of 5
throttled by zone "sl": cost exceeds the zone's limit of 5



=== TEST 10: several zones of different algorithms in one location: a request rejected by one is charged to none
--- http_config
throttle_zone $http_x_key zone=a:1m rate=2r/m algorithm=sliding_log;
throttle_zone $http_x_key zone=b:1m rate=10r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=c:1m rate=10r/h algorithm=sliding_window;
--- user_files
>>> all.txt
all
--- config
# /all.txt: the three zones; the others read one zone's state (cost=0)
location = /all.txt {
    throttle zone=a;
    throttle zone=b;
    throttle zone=c;
}
location = /a.txt {
    throttle zone=a cost=$arg_cost;
}
location = /b.txt {
    throttle zone=b cost=$arg_cost;
}
location = /index.html {
    throttle zone=c cost=$arg_cost;
}
--- requests
perl: window_guard(3600, 2);
# the sliding_log rejects; it has the fewest units left: it binds
GET /all.txt => 200
  > X-Key: k
  RateLimit-Policy: "a";q=2;w=60
  RateLimit: "a";r=1;t=60
GET /all.txt => 200
  > X-Key: k
  RateLimit: "a";r=0;t=60
GET /all.txt x3 => 429
  > X-Key: k
  Retry-After: 60
  RateLimit: "a";r=0;t=60
# b and c were charged for the two admitted requests only
GET /b.txt?cost=0 => 200
  > X-Key: k
  RateLimit-Policy: "b";q=10;w=3600
  RateLimit ~ ^"b";r=8;t=\d+$
GET /index.html?cost=0 => 200
  > X-Key: k
  RateLimit-Policy: "c";q=10;w=3600
  RateLimit ~ ^"c";r=8;t=\d+$
# the fixed_window rejects, the sliding_log would admit
GET /b.txt?cost=9 => 200
  > X-Key: j
  RateLimit ~ ^"b";r=1;t=\d+$
GET /all.txt => 200
  > X-Key: j
  RateLimit ~ ^"b";r=0;t=\d+$
GET /all.txt x2 => 429
  > X-Key: j
  Retry-After ~ ^\d+$
  RateLimit ~ ^"b";r=0;t=\d+$
# the sliding_log recorded the admitted request only, c was charged 1
GET /a.txt?cost=0 => 200
  > X-Key: j
  RateLimit: "a";r=1;t=60
GET /index.html?cost=0 => 200
  > X-Key: j
  RateLimit ~ ^"c";r=9;t=\d+$
--- error_log
throttled by zone "a", retry after
throttled by zone "b", retry after
--- no_error_log
throttled by zone "c"



=== TEST 11: several zones: a sliding_log records only the requests every zone admitted
--- http_config
throttle_zone $http_x_key zone=x:1m rate=5r/m algorithm=sliding_log;
throttle_zone $http_x_key zone=y:1m rate=1r/h algorithm=fixed_window;
--- config
location = /a.txt {
    throttle zone=x;
    throttle zone=y;
}
location = /b.txt {
    throttle zone=x;
}
--- requests
perl: window_guard(3600, 2);
GET /a.txt => 200
  > X-Key: k
  RateLimit ~ ^"y";r=0;t=\d+$
GET /a.txt x3 => 429
  > X-Key: k
  RateLimit ~ ^"y";r=0;t=\d+$
# x holds one entry: 5 - 1 - this one
GET /b.txt => 200
  > X-Key: k
  RateLimit: "x";r=3;t=60
GET /b.txt x3 => 200
  > X-Key: k
GET /b.txt => 429
  > X-Key: k
  Retry-After: 60
  RateLimit: "x";r=0;t=60



=== TEST 12: two sliding_logs in one location: the one that admits records nothing when the other rejects
--- http_config
throttle_zone $http_x_key zone=big:1m rate=4r/m algorithm=sliding_log;
throttle_zone $http_x_key zone=small:1m rate=1r/m algorithm=sliding_log;
--- config
location = /a.txt {
    throttle zone=big;
    throttle zone=small;
}
location = /b.txt {
    throttle zone=big;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  RateLimit: "small";r=0;t=60
GET /a.txt x3 => 429
  > X-Key: k
  Retry-After: 60
  RateLimit: "small";r=0;t=60
GET /b.txt => 200
  > X-Key: k
  RateLimit: "big";r=2;t=60
GET /b.txt x2 => 200
  > X-Key: k
GET /b.txt => 429
  > X-Key: k
  RateLimit: "big";r=0;t=60



=== TEST 13: dry run with a sliding_log: would-be rejections are marked and not recorded in the log
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
--- config
location = /a.txt {
    throttle zone=sl cost=$arg_cost;
    throttle_dry_run on;
    add_header X-Status $throttle_status always;
    add_header X-Retry-After $throttle_retry_after always;
}
location = /b.txt {
    throttle zone=sl cost=$arg_cost;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt?cost=2 => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "sl";r=1;t=60
# would need 2 of the 1 left: not recorded, so r stays 1
GET /a.txt?cost=2 x3 => 200
  > X-Key: k
  X-Status: REJECTED_DRY_RUN
  X-Retry-After: 60
  no Retry-After
  RateLimit-Policy: "sl";q=3;w=60
  RateLimit: "sl";r=1;t=60
  body: a
# outside dry run the one unit left is still there
GET /b.txt?cost=1 => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "sl";r=0;t=60
GET /a.txt?cost=1 x2 => 200
  > X-Key: k
  X-Status: REJECTED_DRY_RUN
  RateLimit: "sl";r=0;t=60
GET /b.txt?cost=1 => 429
  > X-Key: k
  X-Status: REJECTED
  Retry-After: 60
  RateLimit: "sl";r=0;t=60
--- error_log
~ \[error\] .*throttled by zone "sl" \(dry run\), retry after \d+ ms
throttled by zone "sl", retry after



=== TEST 14: variables for the window zones: $throttle_limit is the rate's count + burst
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=2r/m burst=1 algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=2r/m burst=1 algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=2r/m burst=1 algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
add_header X-Status $throttle_status always;
add_header X-Limit $throttle_limit always;
add_header X-Remaining $throttle_remaining always;
add_header X-Reset $throttle_reset always;
add_header X-Retry-After $throttle_retry_after always;
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
# sliding_log: exact
GET /sl.txt x3 => 200
  > X-Key: k
  X-Status: PASSED
  X-Limit: 3
  X-Reset: 60
  X-Retry-After: 0
GET /sl.txt => 429
  > X-Key: k
  X-Status: REJECTED
  X-Limit: 3
  X-Remaining: 0
  X-Reset: 60
  X-Retry-After: 60
  Retry-After: 60
perl {
    window_guard(60, 1.5);
    for my $alg (qw(fw sw)) {
        for my $i (1 .. 4) {
            my ($res, $t0, $t1) = timed("/$alg.txt", 'k');
            my $start = $t0 - $t0 % 60_000_000;
            my $label = "$name: $alg request $i";
            is($res->{status}, $i <= 3 ? 200 : 429, "$label: status");
            is(header($res, 'X-Status'), $i <= 3 ? 'PASSED' : 'REJECTED', "$label: \$throttle_status");
            is(header($res, 'X-Limit'), 3, "$label: \$throttle_limit");
            is(header($res, 'X-Remaining'), $i <= 3 ? 3 - $i : 0, "$label: \$throttle_remaining");
            my $end = $start + ($alg eq 'fw' ? 60e6 : 120e6);
            between(header($res, 'X-Reset'), ceil_s($end - $t1), ceil_s($end - $t0),
                    "$label: \$throttle_reset");
            my ($r, $t) = ratelimit($res, $alg);
            is(header($res, 'X-Reset'), $t, "$label: \$throttle_reset is RateLimit's t");
            if ($i <= 3) {
                is(header($res, 'X-Retry-After'), 0, "$label: \$throttle_retry_after");
            } else {
                # fixed_window: the minute's end; sliding_window: 3 units
                # weigh 3 * (60 - e) / 60, and 1 more fits from e = 20 s
                my $at = $start + ($alg eq 'fw' ? 60e6 : 80e6);
                between(header($res, 'X-Retry-After'), ceil_s($at - $t1), ceil_s($at - $t0),
                        "$label: \$throttle_retry_after");
                is(header($res, 'X-Retry-After'), header($res, 'Retry-After'),
                   "$label: \$throttle_retry_after is Retry-After");
            }
        }
    }
}



=== TEST 15: sliding_log memory: the smallest zone (32k), 8 KB a key: new keys evict old ones, all are decided, the warning is logged once
--- http_config
throttle_zone $http_x_key zone=sl:32k rate=1000r/m algorithm=sliding_log log_max=1000;
--- config
location / {
    throttle zone=sl;
    add_header X-Status $throttle_status always;
}
--- requests
perl {
    my %st;
    for my $i (1 .. 300) {
        my $res = request('GET /a.txt', 'X-Key' => "key-$i");
        $st{ ($res->{status} // 'none') . ' ' . (header($res, 'X-Status') // '-')
             . ' ' . (header($res, 'RateLimit') // '-') }++;
    }
    is_deeply(\%st, { '200 PASSED "sl";r=999;t=60' => 300 },
              "$name: 300 distinct keys: all admitted and decided (none ERROR_ALLOWED)")
        or diag(explain \%st);
    # the most recent key kept its log; the first was evicted and starts afresh
    my $res = request('GET /a.txt', 'X-Key' => 'key-300');
    is(header($res, 'RateLimit'), '"sl";r=998;t=60', "$name: the newest key kept its entry");
    $res = request('GET /a.txt', 'X-Key' => 'key-1');
    is(header($res, 'RateLimit'), '"sl";r=999;t=60', "$name: an evicted key starts afresh");
    my @warn = grep { /is full: evicting keys that are still limited/ } error_lines();
    is(scalar @warn, 1, "$name: the eviction of live keys is logged once (once a minute)")
        or diag(join "\n", @warn);
    # one key's log takes the ring: 1000 admitted, the 1001st rejected
    my %n;
    $n{ request('GET /a.txt', 'X-Key' => 'full')->{status} }++ for 1 .. 1001;
    is_deeply(\%n, { 200 => 1000, 429 => 1 }, "$name: one key: 1000 admitted, then rejected")
        or diag(explain \%n);
}
--- error_log
~ \[warn\] .*throttle zone "sl" is full: evicting keys that are still limited
--- no_error_log
did not free room



=== TEST 16: a reload keeps the state of each algorithm
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=3r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=3r/h algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
add_header X-Gen 1 always;
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
perl: window_guard(3600, 5);
GET /fw.txt x2 => 200
  > X-Key: k
GET /fw.txt => 200
  > X-Key: k
  RateLimit ~ ^"fw";r=0;t=\d+$
GET /sw.txt x2 => 200
  > X-Key: k
  RateLimit ~ ^"sw";r=[21];t=\d+$
GET /sl.txt x2 => 200
  > X-Key: k
  RateLimit ~ ^"sl";r=[21];t=60$
--- reload_config
add_header X-Gen 2 always;
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests_after_reload
GET /fw.txt => 429
  > X-Key: k
  X-Gen: 2
  RateLimit ~ ^"fw";r=0;t=\d+$
GET /sw.txt => 200
  > X-Key: k
  X-Gen: 2
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /sw.txt => 429
  > X-Key: k
GET /sl.txt => 200
  > X-Key: k
  X-Gen: 2
  RateLimit: "sl";r=0;t={60-}
GET /sl.txt => 429
  > X-Key: k
  Retry-After: {60-}
--- no_error_log
[emerg]



=== TEST 17: a new limit applies to the kept window counters; a sliding_log may change log_max= but not its limit
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=3r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=3r/h algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
perl: window_guard(3600, 5);
GET /fw.txt x3 => 200
  > X-Key: k
GET /sw.txt x3 => 200
  > X-Key: k
GET /sl.txt x3 => 200
  > X-Key: k
GET /fw.txt => 429
  > X-Key: k
--- reload_http_config
throttle_zone $http_x_key zone=fw:1m rate=3r/h burst=2 algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=5r/h algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log log_max=3;
--- requests_after_reload
# 3 counted, limit 5
GET /fw.txt => 200
  > X-Key: k
  RateLimit-Policy: "fw";q=5;w=3600
  RateLimit ~ ^"fw";r=1;t=\d+$
GET /sw.txt => 200
  > X-Key: k
  RateLimit-Policy: "sw";q=5;w=3600
  RateLimit ~ ^"sw";r=1;t=\d+$
# the log's 3 entries are still there
GET /sl.txt => 429
  > X-Key: k
  Retry-After: {60-}
  RateLimit: "sl";r=0;t={60-}
--- no_error_log
[emerg]



=== TEST 18: a reload changing a sliding_log's limit is refused, naming the zone and both limits; the old configuration and state keep serving
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/m algorithm=sliding_log;
--- config
location / {
    throttle zone=sl;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt x2 => 200
  > X-Key: k
--- reload_http_config
throttle_zone $http_x_key zone=sl:1m rate=3r/m burst=2 algorithm=sliding_log;
--- reload_config
location / {
    throttle zone=sl;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*throttle_zone "sl" changed the timestamps its sliding_log keeps per key \(its limit, or log_max= where the limit is a variable\) from 3 to 5; rename the zone or change its size to start afresh
--- requests_after_reload
GET /a.txt => 200
  > X-Key: k
  X-Gen: 1
  RateLimit-Policy: "sl";q=3;w=60
  RateLimit: "sl";r=0;t={60-}
GET /a.txt => 429
  > X-Key: k
  X-Gen: 1



=== TEST 19: a reload changing a window zone's algorithm is refused
--- http_config
throttle_zone $http_x_key zone=z:1m rate=2r/h algorithm=fixed_window;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
perl: window_guard(3600, 5);
GET /a.txt x2 => 200
  > X-Key: k
--- reload_http_config
throttle_zone $http_x_key zone=z:1m rate=2r/h algorithm=sliding_window;
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*throttle_zone "z" changed its algorithm from fixed_window to sliding_window
--- requests_after_reload
GET /a.txt => 429
  > X-Key: k
  X-Gen: 1
  RateLimit ~ ^"z";r=0;t=\d+$



=== TEST 20: a reload from gcra to sliding_log is refused
--- http_config
throttle_zone $http_x_key zone=z:1m rate=2r/m;
--- config
location / {
    throttle zone=z;
    add_header X-Gen 1 always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
--- reload_http_config
throttle_zone $http_x_key zone=z:1m rate=2r/m algorithm=sliding_log;
--- reload_config
location / {
    throttle zone=z;
    add_header X-Gen 2 always;
}
--- reload_fails
~ \[emerg\] .*throttle_zone "z" changed its algorithm from gcra to sliding_log
--- requests_after_reload
GET /a.txt => 429
  > X-Key: k
  X-Gen: 1
  RateLimit-Policy: "z";q=1;w=30
  Retry-After: {30-}



=== TEST 21: an empty key is not limited, whatever the algorithm
--- http_config
throttle_zone $http_x_key zone=fw:1m rate=1r/h algorithm=fixed_window;
throttle_zone $http_x_key zone=sw:1m rate=1r/h algorithm=sliding_window;
throttle_zone $http_x_key zone=sl:1m rate=1r/m algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
add_header X-Status $throttle_status always;
add_header X-Remaining $throttle_remaining always;
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
perl: window_guard(3600, 2);
GET /fw.txt x3 => 200
  X-Status: PASSED
  no X-Remaining
  no RateLimit
  no RateLimit-Policy
  body: fw
GET /sw.txt x3 => 200
  X-Status: PASSED
  no X-Remaining
  no RateLimit
  body: sw
GET /sl.txt x3 => 200
  X-Status: PASSED
  no X-Remaining
  no RateLimit
  body: sl
# the same locations limit a request with a key
GET /fw.txt => 200
  > X-Key: k
  RateLimit ~ ^"fw";r=0;t=\d+$
GET /fw.txt => 429
  > X-Key: k
GET /sw.txt => 200
  > X-Key: k
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /sw.txt => 429
  > X-Key: k
GET /sl.txt => 200
  > X-Key: k
  RateLimit: "sl";r=0;t=60
GET /sl.txt => 429
  > X-Key: k
# and without one, still not
GET /fw.txt => 200
  no RateLimit
GET /sw.txt => 200
  no RateLimit
GET /sl.txt => 200
  no RateLimit



=== TEST 22: both workers share a sliding_log's ring: each request sees the entries of all before it
--- http_config
throttle_zone k zone=sl:1m rate=30r/m algorithm=sliding_log;
--- config
location / {
    throttle zone=sl;
    add_header X-Pid $pid always;
}
--- requests eval
my $out = '';
for my $n (1 .. 30) {
    $out .= "GET /a.txt => 200\n  RateLimit: \"sl\";r=" . (30 - $n) . ";t=60\n";
}
$out . "GET /a.txt => 429\n  Retry-After: 60\n  RateLimit: \"sl\";r=0;t=60\n";
--- distinct
X-Pid >= 2



=== TEST 23: concurrent requests over both workers: each algorithm admits exactly its limit
--- http_config
throttle_zone k zone=fw:1m rate=10r/h burst=5 algorithm=fixed_window;
throttle_zone k zone=sw:1m rate=10r/h burst=5 algorithm=sliding_window;
throttle_zone k zone=sl:1m rate=10r/m burst=5 algorithm=sliding_log;
--- user_files
>>> fw.txt
fw
>>> sw.txt
sw
>>> sl.txt
sl
--- config
add_header X-Pid $pid always;
location = /fw.txt {
    throttle zone=fw;
}
location = /sw.txt {
    throttle zone=sw;
}
location = /sl.txt {
    throttle zone=sl;
}
--- requests
perl: window_guard(3600, 2);
parallel 50 /fw.txt => 200 x15, 429 x35
parallel 50 /sw.txt => 200 x15, 429 x35
parallel 50 /sl.txt => 200 x15, 429 x35
GET /fw.txt => 429
  RateLimit ~ ^"fw";r=0;t=\d+$
GET /sw.txt => 429
  RateLimit ~ ^"sw";r=0;t=\d+$
GET /sl.txt => 429
  RateLimit: "sl";r=0;t=60
  Retry-After: 60
--- distinct
X-Pid >= 2



=== TEST 24: sliding_log with keys longer than 255 bytes (stored as digests): each keeps its own log
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=1r/m algorithm=sliding_log;
--- config
location / {
    throttle zone=sl;
}
--- requests eval
my ($k1, $k2) = ('a' x 300, 'a' x 299 . 'b');
"GET /a.txt => 200\n  > X-Key: $k1\n  RateLimit: \"sl\";r=0;t=60\n"
. "GET /a.txt => 429\n  > X-Key: $k1\n  Retry-After: 60\n"
. "GET /a.txt => 200\n  > X-Key: $k2\n  RateLimit: \"sl\";r=0;t=60\n"
. "GET /a.txt => 429\n  > X-Key: $k2\n  Retry-After: 60\n";



=== TEST 25: a zone too small to hold one key of its sliding_log is refused (it would let every request through)
--- http_config
throttle_zone $http_x_key zone=sl:32k rate=100000r/m algorithm=sliding_log log_max=100000;
--- config
location / {
    throttle zone=sl;
}
--- must_die
~ \[emerg\] .*throttle_zone "sl" is too small to hold one key, which takes up to 80\d{4} bytes; make the zone larger



=== TEST 26: a 1m zone holds one key of 100000 timestamps (800 KB); the next key evicts it
--- http_config
throttle_zone $http_x_key zone=sl:1m rate=100000r/m algorithm=sliding_log log_max=100000;
--- config
location / {
    throttle zone=sl;
    add_header X-Status $throttle_status always;
}
--- requests
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "sl";r=99999;t=60
GET /a.txt => 200
  > X-Key: k
  RateLimit: "sl";r=99998;t=60
GET /a.txt => 200
  > X-Key: other
  X-Status: PASSED
  RateLimit: "sl";r=99999;t=60
GET /a.txt => 200
  > X-Key: k
  X-Status: PASSED
  RateLimit: "sl";r=99999;t=60
--- error_log
~ \[warn\] .*throttle zone "sl" is full: evicting keys that are still limited
--- no_error_log
did not free room
