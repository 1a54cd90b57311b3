# SPDX-License-Identifier: BSD-2-Clause
# throttle_api's top=: a zone's most rejected keys (docs/api.md, "Who is
# being limited").
#  - 50 keys rejected 1 to 50 times each, in a local zone and in a strict
#    one (rejections by Redis and by the zone's memory of them): top=10
#    gives the 10 most rejected in order, with their exact counts (the
#    table has room for all), error 0, and times within the test's;
#  - more keys than a small zone's table holds (8 entries): every count
#    returned is within its error of the key's rejections, and every key
#    rejected more than the least count returned is there;
#  - top_decay=1s: counts halve at each second of the Unix clock, and a
#    key whose count reaches 0 leaves;
#  - what counts: dry-run rejections, throttle_api checks rejected, a
#    concurrent= zone's refusals (top= may read such a zone); not a zone
#    that passed a request another zone rejected;
#  - a reload keeps the counts and takes the new top_decay=;
#  - bad requests: 400 and what was wrong; HEAD; top_decay= out of range.
#
# Rates are 1r/d burst=0: a key's first request passes, every other is
# rejected. The counts decay, so the blocks that count exactly use
# top_decay=1h and start away from the turn of the hour.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);

use Clock ();
use ThrottleApi qw(json_of api_get api_post error_is);
use ThrottleTest;

require_redis_module();

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

my @TOP_FIELDS = qw(decay_ms keys now_ms size zone);

# GET ?zone=ZONE&top=N, checked as a good answer (200, JSON, the fields of
# the answer and of each key): its JSON.
sub top_of {
    my ($name, $zone, $n) = @_;
    my ($res, $json) = api_get("$name: top", "zone=$zone&top=$n");
    is($res->{status}, 200, "$name: top: status 200");
    is(ThrottleTest::Step::header($res, 'Content-Type'), 'application/json',
       "$name: top: Content-Type");
    return { keys => [] } unless $json;
    is(join(',', sort keys %$json), join(',', @TOP_FIELDS),
       "$name: top: its fields");
    is($json->{zone}, $zone, "$name: top: the zone");
    my $now = int(time * 1000);
    ok(abs($json->{now_ms} - $now) < 5000, "$name: top: now_ms is now")
        or diag("$json->{now_ms} vs $now");
    cmp_ok(scalar @{ $json->{keys} }, '<=', $n, "$name: top: at most $n keys");
    for my $k (@{ $json->{keys} }) {
        my @extra = grep { !/^(key|count|error|first_ms|last_ms|hashed|truncated)$/ }
                    keys %$k;
        is("@extra", '', "$name: top: $k->{key}: no other field");
        ok($k->{first_ms} <= $k->{last_ms} && $k->{last_ms} <= $json->{now_ms},
           "$name: top: $k->{key}: first_ms <= last_ms <= now_ms");
    }
    return $json;
}

# Sends N requests of key KEY at once to URI: under rate=1r/d burst=0 one
# passes (if the key is new) and the others are rejected. The rejections
# (429) seen.
sub reject_n {
    my ($key, $n, $uri) = @_;
    my @res = ThrottleTest::Step::parallel_requests($n, "GET $uri", 'X-Key' => $key);
    return scalar grep { ($_->{status} // 0) == 429 } @res;
}

# 50 keys, k1 to k50, key ki rejected i times: the rejections seen, by key.
sub flood_50 {
    my ($uri) = @_;
    my %seen;
    for my $i (1 .. 50) {
        $seen{"k$i"} = reject_n("k$i", $i + 1, $uri);
    }
    return \%seen;
}

# 50 keys, k1 to k50, key ki rejected i times at URI, away from the turn
# of the hour (top_decay=1h); then ZONE's answer: top=10 is k50 to k41
# with their exact counts, no error, first and last rejections within the
# flood; top=64 has all 50.
sub fifty_ok {
    my ($name, $zone, $uri) = @_;
    Clock::hour_guard(60);
    my $t0 = int(time * 1000);
    my $seen = flood_50($uri);
    is_deeply([ map { $seen->{"k$_"} } 1 .. 50 ], [ 1 .. 50 ],
              "$name: key ki was rejected i times") or diag(explain $seen);
    my $top = top_of("$name: 10", $zone, 10);
    is_deeply([ map { [ $_->{key}, $_->{count}, $_->{error} ] } @{ $top->{keys} } ],
              [ map { [ "k$_", $_, 0 ] } reverse 41 .. 50 ],
              "$name: top=10: k50 to k41, exact counts, no error")
        or diag(explain $top->{keys});
    is($top->{size}, 64, "$name: a 1m zone tracks 64 keys");
    is($top->{decay_ms}, 3_600_000, "$name: decay_ms is top_decay=");
    my $t1 = int(time * 1000) + 1;
    ok(!grep({ $_->{first_ms} < $t0 || $_->{last_ms} > $t1 } @{ $top->{keys} }),
       "$name: first_ms and last_ms within the flood");
    my $all = top_of("$name: 64", $zone, 64);
    is_deeply({ map { $_->{key} => $_->{count} } @{ $all->{keys} } },
              { map { ("k$_" => $_) } 1 .. 50 }, "$name: top=64: all 50, exact");
}

run_blocks();

__DATA__

Shared by the blocks below (t/lib/ThrottleTest/Blocks.pm, SHARED BY THE
BLOCKS OF A FILE): @redis_main, the Redis backend "main"; @top, the
endpoint at /throttle for zones z and c; a default configuration that
limits /a.txt by z.

--- @redis_main
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=1h;
--- config
location = /a.txt {
    throttle zone=z;
}
location = /throttle {
    throttle_api zones=z;
}


=== TEST 1: local zone: 50 keys rejected 1 to 50 times: the 10 most rejected in order, exact
--- requests
perl {
    main::fifty_ok($name, 'z', '/a.txt');
    # a passed request touches nothing
    my $before = main::top_of("$name: before", 'z', 64);
    is(request('GET /a.txt', 'X-Key' => 'fresh')->{status}, 200, "$name: a new key passes");
    my $after = main::top_of("$name: after", 'z', 64);
    is_deeply($after->{keys}, $before->{keys}, "$name: a passed request changes nothing");
}



=== TEST 2: strict zone: Redis's rejections and the zone's memory of them count alike
--- redis
redis
--- http_config
@redis_main
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=1h redis=main;
--- requests
perl {
    main::fifty_ok($name, 'z', '/a.txt');
    my $m = metrics_text();
    like($m, qr/nginx_throttle_denial_cache_hits_total\{zone="z"\} [1-9]/,
         "$name: some rejections came from the zone's memory");
}
--- config
location = /a.txt {
    throttle zone=z;
}
location = /throttle {
    throttle_api zones=z;
}
location = /metrics {
    throttle_metrics;
}



=== TEST 3: more keys than the table holds: each count within its error, and no key rejected more than the least count is missing
--- http_config
throttle_zone $http_x_key zone=z:128k rate=1r/d burst=0 top_decay=1h;
--- requests
perl {
    Clock::hour_guard(60);
    my $seed = $ENV{TEST_THROTTLE_SEED} // int rand 1e9;
    srand $seed;
    # 4 heavy keys and 60 light ones, in a random order
    my %want = (h1 => 30, h2 => 20, h3 => 12, h4 => 6);
    $want{"n$_"} = 1 + int rand 3 for 1 .. 60;
    my @stream = map { ($_) x $want{$_} } sort keys %want;
    for my $i (reverse 1 .. $#stream) {
        my $j = int rand($i + 1);
        @stream[$i, $j] = @stream[$j, $i];
    }
    my %seen;
    is(request('GET /a.txt', 'X-Key' => $_)->{status}, 200, "$name: $_ passes once")
        for sort keys %want;
    for my $key (@stream) {
        $seen{$key}++ if (request('GET /a.txt', 'X-Key' => $key)->{status} // 0) == 429;
    }
    is_deeply(\%seen, \%want, "$name: every rejection seen (seed $seed)");
    my $top = main::top_of($name, 'z', 8);
    is($top->{size}, 8, "$name: a 128k zone tracks 8 keys");
    is(scalar @{ $top->{keys} }, 8, "$name: the table is full");
    my ($least) = sort { $a <=> $b } map { $_->{count} } @{ $top->{keys} };
    my %in;
    for my $k (@{ $top->{keys} }) {
        my $true = $seen{ $k->{key} } // 0;
        $in{ $k->{key} } = 1;
        ok($k->{count} - $k->{error} <= $true && $true <= $k->{count},
           "$name: $k->{key}: $k->{count} - $k->{error} <= $true <= $k->{count}");
    }
    my @missing = grep { $seen{$_} > $least && !$in{$_} } sort keys %seen;
    is("@missing", '', "$name: every key rejected more than $least times is there")
        or diag(explain $top->{keys});
    my @order = map { $_->{count} } @{ $top->{keys} };
    is_deeply(\@order, [ sort { $b <=> $a } @order ], "$name: highest count first");
}



=== TEST 4: top_decay=1s: counts halve at each second of the Unix clock; a count of 0 leaves
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=1s;
--- requests
perl {
    # 8 rejections of one key and 1 of another, all in one second (sent
    # just after a second turns; on a machine so slow that they were not,
    # again with two other keys)
    my ($eight, $one, $last_ms);
    for my $try (1 .. 3) {
        my $t = time;
        sleep(1.05 - ($t - int $t));
        is(main::reject_n("eight$try", 9, '/a.txt'), 8, "$name: 8 rejections");
        is(main::reject_n("one$try", 2, '/a.txt'), 1, "$name: 1 rejection");
        my %by = map { $_->{key} => $_ } @{ main::top_of("$name: $try", 'z', 8)->{keys} };
        ($eight, $one) = ("eight$try", "one$try");
        next unless $by{$eight} && $by{$one};
        $last_ms = $by{$one}{last_ms};
        last if int($by{$eight}{first_ms} / 1000) == int($last_ms / 1000);
        note("$name: try $try: the rejections spread over two seconds");
        $last_ms = undef;
    }
    ok(defined $last_ms, "$name: the rejections are of one second") or return;
    my $check = sub {
        my ($what) = @_;
        my $top = main::top_of("$name: $what", 'z', 8);
        is($top->{decay_ms}, 1000, "$name: $what: decay_ms");
        my %by = map { $_->{key} => $_ } @{ $top->{keys} };
        my $periods = int($top->{now_ms} / 1000) - int($last_ms / 1000);
        is($by{$eight} ? $by{$eight}{count} : 0, 8 >> $periods,
           "$name: $what: $eight: 8 halved $periods times") or diag(explain $top);
        is($by{$one} ? $by{$one}{count} : 0, 1 >> $periods,
           "$name: $what: $one: 1 halved $periods times");
        return $periods;
    };
    my $p = $check->('at once');
    sleep 1.2;
    cmp_ok($check->('a second later'), '>=', $p + 1, "$name: a second has turned");
    sleep 3;
    cmp_ok($check->('4 seconds later'), '>=', 4, "$name: four have turned: all gone");
}



=== TEST 5: what counts: dry-run rejections, rejected API checks, a concurrent= zone's refusals; not a zone another rejected for it
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=1h;
throttle_zone $http_x_key zone=wide:1m rate=100r/s burst=100 top_decay=1h;
throttle_zone $http_x_key zone=c:1m concurrent=1 top_decay=1h;
--- config
location = /a.txt {
    throttle zone=z;
    throttle zone=wide;
}
location = /dry.txt {
    throttle zone=z;
    throttle_dry_run on;
    try_files /a.txt =404;
}
location = /hold {
    throttle zone=c;
    proxy_pass http://127.0.0.1:1;
}
location = /throttle {
    throttle_api zones=z,wide,c;
}
--- requests
perl {
    Clock::hour_guard(60);
    is(main::reject_n('both', 4, '/a.txt'), 3, "$name: both: 3 rejected by z");
    my %dry;
    $dry{ request('GET /dry.txt', 'X-Key' => 'dry')->{status} }++ for 1 .. 3;
    is_deeply(\%dry, { 200 => 3 }, "$name: dry run rejects nothing");
    my ($res) = main::api_get("$name: api 1", 'zone=z&key=api');
    is($res->{status}, 200, "$name: api: the first check passes");
    ($res) = main::api_get("$name: api 2", 'zone=z&key=api') for 1 .. 2;
    is($res->{status}, 429, "$name: api: then rejected");

    # a request of "held" holds c's one place while nginx waits for its body
    my $sock = ThrottleTest::Http::connect_to($nginx) or die "connect: $!\n";
    print $sock "POST /hold HTTP/1.1\r\nHost: localhost\r\nX-Key: held\r\n"
              . "Content-Length: 10\r\n\r\n";
    ok(all_read(), "$name: the held request is read");
    is(request('GET /hold', 'X-Key' => 'held')->{status}, 429, "$name: held: refused")
        for 1 .. 2;

    my $z = main::top_of("$name: z", 'z', 10);
    is_deeply({ map { $_->{key} => $_->{count} } @{ $z->{keys} } },
              { both => 3, dry => 2, api => 2 },
              "$name: z: its rejections, dry run and API checks too");
    is_deeply(main::top_of("$name: wide", 'wide', 10)->{keys}, [],
              "$name: wide rejected nothing");
    my $c = main::top_of("$name: c", 'c', 8);
    is_deeply([ map { [ $_->{key}, $_->{count} ] } @{ $c->{keys} } ],
              [ [ held => 2 ] ], "$name: c: its refusals");
    close $sock;
}



=== TEST 6: a reload keeps the counts, and decays them by the new top_decay=
--- requests
perl {
    Clock::hour_guard(60);
    is(main::reject_n('kept', 6, '/a.txt'), 5, "$name: 5 rejections");
}
--- reload_http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=2h;
--- requests_after_reload
perl {
    my $top = main::top_of($name, 'z', 3);
    is($top->{decay_ms}, 7_200_000, "$name: the new decay");
    is_deeply([ map { [ $_->{key}, $_->{count} ] } @{ $top->{keys} } ],
              [ [ kept => 5 ] ], "$name: the count kept");
}



=== TEST 7: bad requests get 400 and what was wrong; HEAD; long keys
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/d burst=0 top_decay=1h;
throttle_zone $http_x_key zone=other:1m rate=1r/d burst=0;
--- requests
perl {
    my @bad = (
        [ 'zone=z&top=0', 'top "0" is not an integer from 1 to 64' ],
        [ 'zone=z&top=abc', 'top "abc" is not an integer from 1 to 64' ],
        [ 'zone=z&top=', 'top "" is not an integer from 1 to 64' ],
        [ 'zone=z&top=-1', 'top "-1" is not an integer from 1 to 64' ],
        [ 'zone=z&top=65', 'top "65" is more keys than zone "z" tracks: at most 64' ],
        [ 'zone=z&top=99999999999999999999',
          'top "99999999999999999999" is not an integer from 1 to 64' ],
        [ 'zone=z&top=3&key=alice',
          '"top" cannot go with "key": top= reads a zone\'s most rejected keys, it checks none' ],
        [ 'cost=2&zone=z&top=3',
          '"top" cannot go with "cost": top= reads a zone\'s most rejected keys, it checks none' ],
        [ 'zone=z&top=3&top=4', 'parameter "top" is repeated' ],
        [ 'zone=z&top=3&zone=z', 'parameter "zone" is repeated' ],
        [ 'zone=z&top=3&limit=4', 'unknown parameter "limit"' ],
        [ 'top=3', 'missing "zone"' ],
        [ 'zone=nope&top=3', 'unknown zone "nope": not one of this endpoint\'s zones=' ],
        [ 'zone=other&top=3', 'unknown zone "other": not one of this endpoint\'s zones=' ],
        [ 'zone=z&top=%zz', 'parameter "top" has a \'%\' not followed by two hex digits' ],
    );
    for my $case (@bad) {
        my ($query, $error) = @$case;
        main::error_is("$name: $query", request("GET /throttle?$query"), 400, $error);
    }
    # top= is a GET's (and HEAD's): a POST's fields are a check's
    my ($res) = main::api_post("$name: POST", { zone => 'z', top => 3 });
    main::error_is("$name: POST", $res, 400, 'unknown field "top"');
    # top=%33 is 3, as any value is decoded
    is(request('GET /throttle?zone=z&top=%33')->{status}, 200, "$name: top=%33");

    # a key longer than the name an entry keeps, and one stored as its
    # SHA-256 digest (longer than 255 bytes)
    my ($cut, $long) = ('c' x 100, 'h' x 300);
    is(main::reject_n($_, 3, '/a.txt'), 2, "$name: 2 rejections of a long key")
        for $cut, $long;
    my $top = main::top_of($name, 'z', 2);
    my %by = map { ($_->{hashed} ? 'hashed' : 'cut') => $_ } @{ $top->{keys} };
    is($by{cut}{key}, 'c' x 64, "$name: a long key cut at 64 bytes");
    ok($by{cut}{truncated} && !exists $by{cut}{hashed}, "$name: and said so");
    require Digest::SHA;
    is($by{hashed}{key}, Digest::SHA::sha256_hex($long),
       "$name: a key of more than 255 bytes: its SHA-256, in hex");
    ok(!exists $by{hashed}{truncated}, "$name: not truncated");

    my $head = request('HEAD /throttle?zone=z&top=3');
    is($head->{status}, 200, "$name: HEAD: 200");
    is($head->{body} // '', '', "$name: HEAD: no body");
}



=== TEST 8: top_decay= below 1s
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m top_decay=500ms;
--- must_die
invalid parameter "top_decay=500ms" in "throttle_zone": use a time from 1s to 1d



=== TEST 9: top_decay= above 1d
--- http_config
throttle_zone $http_x_key zone=z:1m rate=1r/m top_decay=2d;
--- must_die
invalid parameter "top_decay=2d" in "throttle_zone": use a time from 1s to 1d
