# SPDX-License-Identifier: BSD-2-Clause
# throttle_api's settle calls: application code reserves units with a
# decision (whose charged checks carry a "reservation"), then settles what
# it used: the key is charged the difference, or given it back, as a
# "throttle" line's settle= does; without a reservation, it is charged all
# of it. Local zones (GCRA and the window algorithms, whose refunds need
# the reservation's time), strict ones on a real redis-server (the call
# waits for Redis's answer; a stopped Redis loses the settle: 503), an
# async one (settled at once, in Redis after the next sync), GET
# and POST, every bad input (400, nothing settled), and
# nginx_throttle_settles_total. docs/api.md, "Settling", has the rules.
#
# Rates are slow (1r/m, 1r/h) so that the milliseconds a block takes never
# change an expected count; times are checked within 10 s.

use strict;
use warnings;

use Clock ();
use SettleChecks ();
use Test::More;
use ThrottleApi qw(json_of api_get api_post answer_is error_is settled_is
                   reservation_of);
use ThrottleTest;

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# A decision of $cost units for $key in $zone (GET): checks that it passed
# with $remaining left and reserved $cost; returns its reservation.
sub reserve {
    my ($name, $zone, $key, $cost, $remaining) = @_;
    my ($res, $json) = api_get("$name: reserve $cost",
                               "zone=$zone&key=$key&cost=$cost");
    answer_is("$name: reserve $cost", $res, $json, 200, 1,
              { zone => $zone, key => $key, status => 'PASSED',
                remaining => $remaining, reserved => $cost });
    return $json ? $json->{checks}[0]{reservation} : undef;
}

# A look at $key (cost=0): checks the units it has left, and that a look
# reserves nothing.
sub left_is {
    my ($name, $zone, $key, $remaining) = @_;
    my ($res, $json) = api_get("$name: look", "zone=$zone&key=$key&cost=0");
    answer_is("$name: look", $res, $json, 200, 1,
              { zone => $zone, key => $key, remaining => $remaining });
    ok(!defined(($json // {})->{checks}[0]{reservation}),
       "$name: a look reserves nothing");
}

# nginx_throttle_settles_total of $zone, every result (0 when not given).
sub settles_are {
    my ($name, $zone, %want) = @_;
    my $m = ThrottleTest::Step::metrics();
    my %all = (charged => 0, refunded => 0, even => 0, invalid => 0,
               lost => 0, %want);
    my %got = map {
        $_ => $m->{"nginx_throttle_settles_total{zone=\"$zone\",result=\"$_\"}"}
              // 0
    } keys %all;
    is_deeply(\%got, \%all, "$name: ${zone}'s settles counted");
}

# A GET settle of $key; checks the answer ($charged units).
sub settle_get {
    my ($name, $zone, $key, $settle, $reservation, $charged) = @_;
    my $query = "zone=$zone&key=$key&settle=$settle"
        . (defined $reservation ? "&reservation=$reservation" : '');
    my ($res, $json) = api_get("$name: settle $settle", $query);
    settled_is("$name: settle $settle", $res, $json,
               { zone => $zone, key => $key, charged => $charged });
}

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): the endpoint, and the metrics.

--- @endpoint
location = /throttle {
    throttle_api zones=tokens,logins;
}
location = /metrics {
    throttle_metrics;
}

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT timeout=1s;


=== TEST 1: reserve, then settle lower (the rest given back) or higher (a debt, which the next check's retry accounts for)
--- http_config
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
perl {
    my $r = main::reserve($name, 'tokens', 'alice', 5, 5);
    my $cost = (main::reservation_of({ reservation => $r }) // [])->[0];
    is($cost, 5, "$name: the reservation says 5 units");
    # 2 used: 3 given back
    main::settle_get($name, 'tokens', 'alice', 2, $r, -3);
    main::left_is("$name: after a refund", 'tokens', 'alice', 8);
    main::settles_are($name, 'tokens', refunded => 1);

    # reserve 4 by POST, use 10: 6 more, 12 of 10 in all
    my ($res, $json) = main::api_post("$name: POST",
        { zone => 'tokens', key => 'alice', cost => 4 });
    main::answer_is("$name: POST reserve", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 4, reserved => 4 });
    $r = $json->{checks}[0]{reservation};
    ($res, $json) = main::api_post("$name: POST settle",
        { zone => 'tokens', key => 'alice', settle => 10, reservation => $r });
    main::settled_is("$name: POST settle 10", $res, $json,
                     { zone => 'tokens', key => 'alice', charged => 6 });
    main::settles_are($name, 'tokens', refunded => 1, charged => 1);

    # the debt: 12 minutes of units in a funnel of 10, the next unit after
    # 3 minutes
    ($res, $json) = main::api_get("$name: after the debt",
                                  'zone=tokens&key=alice');
    main::answer_is("$name: after the debt", $res, $json, 429, 0,
        { status => 'REJECTED', remaining => 0, retry_after_ms => 180_000,
          reset_after_ms => 720_000 });
    like(header($res, 'Retry-After'), qr/^1[78]\d$/,
         "$name: Retry-After says 3 minutes");

    # as reserved: even, nothing to charge
    $r = main::reserve($name, 'tokens', 'bob', 3, 7);
    main::settle_get($name, 'tokens', 'bob', 3, $r, 0);
    main::left_is("$name: bob", 'tokens', 'bob', 7);
    main::settles_are($name, 'tokens', refunded => 1, charged => 1, even => 1);
}



=== TEST 2: a settle without a reservation charges all of it, never rejected: failed logins counted by application code
--- http_config
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
perl {
    # five failed logins: five units, each a settle of 1
    main::settle_get($name, 'logins', 'eve', 1, undef, 1) for 1 .. 5;
    my ($res, $json) = main::api_get("$name: a login", 'zone=logins&key=eve');
    main::answer_is("$name: eve's 6th login", $res, $json, 429, 0,
        { status => 'REJECTED', remaining => 0, retry_after_ms => 60_000 });
    # a sixth failure is still charged: a settle is never rejected
    main::settle_get($name, 'logins', 'eve', 1, undef, 1);
    ($res, $json) = main::api_get("$name: a login", 'zone=logins&key=eve');
    main::answer_is("$name: eve after 6 failures", $res, $json, 429, 0,
        { status => 'REJECTED', retry_after_ms => 120_000 });
    # a success settles 0: nothing charged
    main::settle_get($name, 'logins', 'bob', 0, undef, 0);
    main::left_is($name, 'logins', 'bob', 5);
    main::settles_are($name, 'logins', charged => 6, even => 1);

    # 25 units on a key of 10 at 1r/m: 16 minutes to wait (docs/settle.md)
    ($res, $json) = main::api_post("$name: POST",
        { checks => [ { zone => 'tokens', key => 'carol', settle => 25 },
                      { zone => 'logins', key => 'carol', settle => 2 } ] });
    main::settled_is("$name: two checks", $res, $json,
                     { zone => 'tokens', key => 'carol', charged => 25 },
                     { zone => 'logins', key => 'carol', charged => 2 });
    ($res, $json) = main::api_get("$name: carol", 'zone=tokens&key=carol');
    main::answer_is("$name: carol's debt", $res, $json, 429, 0,
        { status => 'REJECTED', retry_after_ms => 960_000 });
    main::left_is($name, 'logins', 'carol', 3);
    main::settles_are($name, 'tokens', charged => 1);
}



=== TEST 3: only a charged check has a reservation: not a look, nor a check of a call another check rejected, nor a rejected one
--- http_config
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=0;
--- config
@endpoint
location = /dry {
    throttle_api zones=tokens,logins;
    throttle_dry_run on;
}
--- requests
perl {
    my $both = { checks => [ { zone => 'tokens', key => 'dan', cost => 2 },
                             { zone => 'logins', key => 'dan' } ] };
    my ($res, $json) = main::api_post("$name: both", $both);
    main::answer_is("$name: both pass", $res, $json, 200, 1,
        { zone => 'tokens', reserved => 2 }, { zone => 'logins', reserved => 1 });
    ($res, $json) = main::api_post("$name: again", $both);
    main::answer_is("$name: logins refuses", $res, $json, 429, 0,
        { zone => 'tokens', status => 'PASSED' },
        { zone => 'logins', status => 'REJECTED' });
    ok(!grep({ exists $_->{reservation} } @{ $json->{checks} }),
       "$name: a refused call reserves nothing");
    # a dry run that would refuse: nothing reserved either
    $res = request('POST /dry', 'Content-Type' => 'application/json',
                   \JSON::PP->new->encode($both));
    $json = main::json_of("$name: dry run", $res);
    main::answer_is("$name: dry run", $res, $json, 200, 1,
        { zone => 'tokens', status => 'PASSED' },
        { zone => 'logins', status => 'REJECTED_DRY_RUN' });
    ok(!grep({ exists $_->{reservation} } @{ $json->{checks} }),
       "$name: a dry run's refused call reserves nothing");
    # a dry run that passes reserves, as settle= settles it
    $res = request('GET /dry?zone=tokens&key=dan');
    $json = main::json_of("$name: dry run passes", $res);
    main::answer_is("$name: dry run passes", $res, $json, 200, 1,
                    { status => 'PASSED', reserved => 1 });
}



=== TEST 4: window algorithms: the reservation's time finds the charge to give back (fixed_window, sliding_window, sliding_log)
--- http_config
throttle_zone $http_x_api_key zone=fixed:1m rate=10r/h algorithm=fixed_window;
throttle_zone $http_x_api_key zone=sliding:1m rate=10r/h algorithm=sliding_window;
throttle_zone $http_x_api_key zone=log:1m rate=10r/h algorithm=sliding_log;
--- config
location = /throttle {
    throttle_api zones=fixed,sliding,log;
}
location = /metrics {
    throttle_metrics;
}
--- requests
perl {
    Clock::hour_guard(60);
    for my $zone (qw(fixed sliding log)) {
        my $r = main::reserve("$name: $zone", $zone, 'alice', 6, 4);
        main::reserve("$name: $zone", $zone, 'alice', 1, 3);
        main::settle_get("$name: $zone", $zone, 'alice', 1, $r, -5);
        main::left_is("$name: $zone", $zone, 'alice', 8);
        main::settles_are("$name: $zone", $zone, refunded => 1);
    }
}



=== TEST 5: every bad settle is refused with 400 and {"error":...}, and settles nothing
--- http_config
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
GET /throttle?zone=tokens&key=a&settle=-1 => 400
  Content-Type: application/json
  body: {"error":"settle \"-1\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=tokens&key=a&settle=1.5 => 400
  body: {"error":"settle \"1.5\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=tokens&key=a&settle= => 400
  body: {"error":"settle \"\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=tokens&key=a&settle=1000000001 => 400
  body: {"error":"settle \"1000000001\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=tokens&key=a&settle=1&settle=2 => 400
  body: {"error":"parameter \"settle\" is repeated"}
GET /throttle?zone=tokens&key=a&settle=1&cost=1 => 400
  body: {"error":"\"settle\" cannot go with \"cost\": a settle charges the units used, at once"}
GET /throttle?zone=tokens&key=a&settle=1&cost=0 => 400
  body: {"error":"\"settle\" cannot go with \"cost\": a settle charges the units used, at once"}
GET /throttle?zone=tokens&key=a&settle=1&delay=0 => 400
  body: {"error":"\"settle\" cannot go with \"delay\": a settle charges the units used, at once"}
GET /throttle?zone=tokens&key=a&reservation=1.1.0.0.0 => 400
  body: {"error":"\"reservation\" goes with \"settle\""}
GET /throttle?zone=tokens&key=a&settle=1&reservation= => 400
  body: {"error":"reservation \"\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=abc => 400
  body: {"error":"reservation \"abc\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=2.1.0.0.0 => 400
  body: {"error":"reservation \"2.1.0.0.0\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=1.0.5.0.0 => 400
  body: {"error":"reservation \"1.0.5.0.0\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=1.1000000001.5.0.0 => 400
  body: {"error":"reservation \"1.1000000001.5.0.0\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=1.1.5.0 => 400
  body: {"error":"reservation \"1.1.5.0\" is not one this endpoint gives"}
GET /throttle?zone=tokens&key=a&settle=1&reservation=1.1.-5.0.0 => 400
  body: {"error":"reservation \"1.1.-5.0.0\" is not one this endpoint gives"}
GET /throttle?zone=tokens&settle=1 => 400
  body: {"error":"missing \"key\""}
GET /throttle?key=a&settle=1 => 400
  body: {"error":"missing \"zone\""}
GET /throttle?zone=nope&key=a&settle=1 => 400
  body: {"error":"unknown zone \"nope\": not one of this endpoint's zones="}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":-1}
  body: {"error":"\"settle\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":1.0}
  body: {"error":"\"settle\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":"1"}
  body: {"error":"\"settle\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":null}
  body: {"error":"\"settle\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":1,"reservation":1}
  body: {"error":"\"reservation\" must be a string"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":1,"reservation":"1.1.0.0"}
  body: {"error":"reservation \"1.1.0.0\" is not one this endpoint gives"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":1,"cost":2}
  body: {"error":"\"settle\" cannot go with \"cost\": a settle charges the units used, at once"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","cost":2,"reservation":"1.1.0.0.0"}
  body: {"error":"\"reservation\" goes with \"settle\""}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"tokens","key":"a","settle":1,"settle":2}
  body: {"error":"field \"settle\" is repeated"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"tokens","key":"a","settle":1},{"zone":"logins","key":"a"}]}
  body: {"error":"a call decides or settles: \"settle\" must be in every check or in none"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"tokens","key":"a"},{"zone":"logins","key":"a","settle":1}]}
  body: {"error":"a call decides or settles: \"settle\" must be in every check or in none"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"tokens","key":"a","settle":1},{"zone":"tokens","key":"b","settle":1}]}
  body: {"error":"zone \"tokens\" is asked twice"}
# a bad check refuses the whole call, the good one before it too
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"tokens","key":"a","settle":7},{"zone":"logins","key":"a","settle":1,"reservation":"x"}]}
  body: {"error":"reservation \"x\" is not one this endpoint gives"}
perl {
    # a long reservation is quoted up to 64 bytes
    my $long = '1.' . ('9' x 100);
    my ($res) = main::api_get("$name: long", "zone=tokens&key=a&settle=1&reservation=$long");
    main::error_is("$name: a long reservation", $res, 400,
        'reservation "' . substr($long, 0, 64) . '" is not one this endpoint gives');
    # nothing was settled, nor counted
    main::left_is($name, 'tokens', 'a', 10);
    main::left_is($name, 'logins', 'a', 5);
    main::settles_are($name, 'tokens');
    main::settles_are($name, 'logins');
}



=== TEST 6: strict: reserve in Redis, settle lower (a refund script with the decision's tokens) or higher (a charge script); the call waits for Redis
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
throttle_zone $http_x_user zone=logins:1m rate=10r/h algorithm=sliding_log
              redis=main;
--- config
@endpoint
--- requests
perl {
    Clock::hour_guard(30);
    my $scripts = $redis->scripts_run;
    my $r = main::reserve($name, 'tokens', 'alice', 5, 5);
    main::settle_get($name, 'tokens', 'alice', 2, $r, -3);
    is($redis->scripts_run - $scripts, 2, "$name: one script to decide, one to settle");
    main::left_is("$name: after a refund", 'tokens', 'alice', 8);
    main::settles_are($name, 'tokens', refunded => 1);

    $r = main::reserve($name, 'tokens', 'alice', 4, 4);
    my ($res, $json) = main::api_post("$name: POST settle",
        { zone => 'tokens', key => 'alice', settle => 10, reservation => $r });
    main::settled_is("$name: POST settle 10", $res, $json,
                     { zone => 'tokens', key => 'alice', charged => 6 });
    ($res, $json) = main::api_get("$name: after the debt",
                                  'zone=tokens&key=alice');
    main::answer_is("$name: after the debt", $res, $json, 429, 0,
        { status => 'REJECTED', remaining => 0, retry_after_ms => 180_000 });

    # without a reservation; as reserved (no script)
    main::settle_get($name, 'tokens', 'bob', 4, undef, 4);
    main::left_is("$name: bob", 'tokens', 'bob', 6);
    $scripts = $redis->scripts_run;
    $r = main::reserve($name, 'tokens', 'bob', 2, 4);
    main::settle_get($name, 'tokens', 'bob', 2, $r, 0);
    is($redis->scripts_run - $scripts, 1, "$name: an even settle sends no script");
    main::settles_are($name, 'tokens', refunded => 1, charged => 2, even => 1);

    # sliding_log: the refund finds the decision's entries by its tokens
    $r = main::reserve($name, 'logins', 'eve', 3, 7);
    isnt((main::reservation_of({ reservation => $r }) // [0, 0, 0])->[2], 0,
         "$name: a strict sliding_log reservation has Redis's tokens");
    main::settle_get($name, 'logins', 'eve', 1, $r, -2);
    main::left_is("$name: eve", 'logins', 'eve', 9);
    main::settles_are($name, 'logins', refunded => 1);
}
--- no_error_log
throttle redis



=== TEST 7: strict, Redis stopped: the settle is lost, and the caller told so with 503; counted lost
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
perl {
    my $r = main::reserve($name, 'tokens', 'alice', 5, 5);
    $redis->stop;
    my ($res, $json) = main::api_get("$name: settle",
        "zone=tokens&key=alice&settle=1&reservation=$r");
    is($res->{status}, 503, "$name: 503");
    is(join(',', sort keys %{ $json // {} }), 'error', "$name: an error");
    like($json->{error} // '', qr/^the settle of zone "tokens" is lost: Redis /,
         "$name: it says the settle is lost") and note($json->{error});
    # a local zone's settle in the same call is applied
    ($res, $json) = main::api_post("$name: POST",
        { checks => [ { zone => 'tokens', key => 'bob', settle => 3 },
                      { zone => 'logins', key => 'bob', settle => 2 } ] });
    is($res->{status}, 503, "$name: POST: 503");
    main::left_is($name, 'logins', 'bob', 3);
    main::settles_are($name, 'tokens', lost => 2);
    main::settles_are($name, 'logins', charged => 1);
}
--- error_log
throttle redis "main"



=== TEST 8: strict, Redis paused: the call waits for the backend's timeout, then 503; other requests are served meanwhile
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
perl {
    my $r = main::reserve($name, 'tokens', 'alice', 5, 5);
    $redis->pause;
    my $t0 = time;
    my $sock = ThrottleTest::connect_to($nginx) or die "connect: $!\n";
    syswrite $sock, "GET /throttle?zone=tokens&key=alice&settle=9&reservation=$r"
                    . " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    my $res = request('GET /throttle?zone=logins&key=bob&settle=1');
    is($res->{status}, 200, "$name: a local settle is answered meanwhile");
    cmp_ok($res->{elapsed}, '<', 0.5, "$name: ... at once");
    $res = ThrottleTest::http_read($sock, { method => 'GET' });
    my $took = time - $t0;
    ok($took > 0.9 && $took < 2, "$name: answered after the 1 s timeout")
        or diag("took $took s");
    main::error_is("$name: lost", $res, 503, 'the settle of zone "tokens" '
        . 'is lost: Redis did not answer (no reply within 1000 ms); it may '
        . 'still have applied it');
    $redis->resume;
    main::settles_are($name, 'tokens', lost => 1);
    main::settles_are($name, 'logins', charged => 1);
}
--- error_log
~ \[error\] .*throttle redis "main" \(127\.0\.0\.1:\d+\): no reply within 1000 ms



=== TEST 9: async: a settle applies here at once, and reaches Redis with the next sync
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_api_key zone=tokens:1m rate=1r/m burst=9 redis=main sync=async;
throttle_zone $http_x_user zone=logins:1m rate=1r/m burst=4;
--- config
@endpoint
--- requests
perl {
    my $r = main::reserve($name, 'tokens', 'carol', 5, 5);
    # 2 used: 3 given back, at once on this nginx
    main::settle_get($name, 'tokens', 'carol', 2, $r, -3);
    main::left_is("$name: after a refund", 'tokens', 'carol', 8);
    # and 4 more without a reservation: 6 in all
    main::settle_get($name, 'tokens', 'carol', 4, undef, 4);
    main::left_is("$name: after a charge", 'tokens', 'carol', 4);
    main::settles_are($name, 'tokens', refunded => 1, charged => 1);
    # Redis holds the 6 units (a GCRA TAT 6 minutes ahead of its clock)
    ok(SettleChecks::redis_units_are($ThrottleTest::Step::CURRENT->{redis}[0],
                                     60e6, 6),
       "$name: Redis holds the 6 units");
}
