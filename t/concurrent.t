# SPDX-License-Identifier: BSD-2-Clause
# concurrent=, local zones: a key's requests in flight, not a rate. One
# nginx (2 workers) in front of a slow backend the test starts
# (t/lib/SlowBackend.pm), which holds each request until the test lets it
# end and counts the requests it holds per key:
#  - the 4th request in flight of a key gets 429 (Retry-After: 1,
#    RateLimit r=0), the admitted ones RateLimit-Policy q=3 (no w) and
#    RateLimit r=places left (no t); other keys are not affected;
#  - a place frees the moment its request ends, however it ends: answer
#    sent, client gone, upstream error (502, 504), internal redirect to
#    an error_page location that throttles too (one place per main
#    request, not two);
#  - a request longer than its lease keeps its place (renewals);
#  - a worker killed with SIGKILL frees its places within the lease
#    bound (no earlier than half a lease, no later than a lease and a
#    half), and no place is left behind;
#  - a reload with requests in flight: the old workers' requests keep
#    their places (past a lease too) and free them when they end,
#    nothing counted twice; a reload that raises concurrent= admits more
#    at once, the places held staying held;
#  - with a rate zone on the same location, a request the rate zone
#    refuses takes no place, and one the concurrent zone refuses is not
#    charged to the rate zone;
#  - the nginx_throttle_in_flight gauge goes 3 -> 0;
#  - throttle_api refuses a check of a concurrent zone with 400.
# Each case has keys of its own. A request is over for nginx once it has
# closed the connection (InFlight::finish): the next request comes after
# its log phase.

use strict;
use warnings;

use JSON::PP ();
use Test::More;
use Time::HiRes qw(time sleep);

use ConcurrentChecks qw(release_all);
use InFlight qw(hold send_request finish probe);
use Processes qw($TIMEOUT wait_until children_of alive wait_gone
                 local_ports_by);
use Prometheus ();
use Responses qw(hdr status_of);
use SlowBackend;
use ThrottleTest;

my $backend = SlowBackend->start;
my $bport = $backend->port;
ConcurrentChecks::backend($backend);

my $headers = <<'HEADERS';
    add_header X-Status $throttle_status always;
    add_header X-Limit $throttle_limit always;
    add_header X-Remaining $throttle_remaining always;
    add_header X-Pid $pid always;
HEADERS

my $http = <<"HTTP";
throttle_zone \$http_x_key zone=streams:1m concurrent=3;
throttle_zone \$http_x_key zone=short:1m concurrent=3 lease=2s;
throttle_zone \$http_x_key zone=rl:1m rate=1r/m burst=1;
throttle_zone \$http_x_key zone=rl4:1m rate=1r/m burst=3;
HTTP
my $server = <<"SERVER";
location /slow {
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
$headers
}
location /timeout {
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
    proxy_read_timeout 1s;
$headers
}
location /flaky {
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
    error_page 502 = /fallback;
$headers
}
location /fallback {
    internal;
    throttle zone=streams;
    set \$args key=\$http_x_key&hold=1;
    proxy_pass http://127.0.0.1:$bport;
$headers
}
location /short {
    throttle zone=short;
    proxy_pass http://127.0.0.1:$bport;
$headers
}
location /both {
    throttle zone=rl;
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
$headers
}
location /both4 {
    throttle zone=rl4;
    throttle zone=streams;
    proxy_pass http://127.0.0.1:$bport;
$headers
}
location = /metrics {
    throttle_metrics;
}
SERVER
my $env = start_instance(http_config => $http, config => $server);

my @killed;    # workers a case killed: their deaths are no crash

# ---------------------------------------------------------------------------
# Helpers

# Runs a case; a die is a failed test, and its keys' held requests are
# let go so that the next cases start clean.
sub case {
    my ($name, $keys, $code) = @_;
    my $ok = eval { $code->($name); 1 };
    unless ($ok) {
        fail("$name: ran to the end");
        diag($@);
    }
    for my $key (@$keys) {
        eval { $backend->release($key); $backend->wait_current($key, 0) };
    }
}

# ConcurrentChecks' checks on this nginx; the zone is "short" for /short.
sub zone_of { $_[0] =~ m{^/short} ? 'short' : 'streams' }
sub held { ConcurrentChecks::held($_[0], $env, @_[1 .. $#_]) }
sub held_n { ConcurrentChecks::held_n($_[0], $env, @_[1 .. $#_]) }
sub refused_ok {
    my ($name, $key, $uri, $zone) = @_;
    ConcurrentChecks::refused_ok($name, $env, $key, $uri, $zone // zone_of($uri));
}
sub admitted_ok {
    my ($name, $res, $left, $zone) = @_;
    ConcurrentChecks::admitted_ok($name, $res, $left, $zone // 'streams');
}
sub three_free_ok {
    my ($name, $key, $uri) = @_;
    ConcurrentChecks::three_free_ok($name, $env, $key, $uri, zone_of($uri));
}

# The "error" of a JSON body {"error":"..."}, or what the body was.
sub json_error {
    my ($res) = @_;
    my $json = eval { JSON::PP->new->utf8->decode($res->{body} // '') };
    return ref $json eq 'HASH' && defined $json->{error}
        ? $json->{error} : 'not {"error":...}: ' . ($res->{body} // '');
}

sub gauge {
    my ($zone) = @_;
    my $m = Prometheus::parse(http_request($env, 'GET /metrics')->{body} // '');
    return $m->{"nginx_throttle_in_flight{zone=\"$zone\"}"};
}

# nginx's workers (after a reload, the old ones too until they exit).
sub workers { children_of($env->{master}) }

# nginx -s reload (with a new http{} configuration if given) while
# requests are in flight: the old workers stay until their requests end,
# so the wait is for 2 new ones. (the old workers, the new ones)
sub reload_in_flight {
    my ($name, $new_http) = @_;
    ThrottleTest::Nginx::write_config($env, undef, $new_http, $server)
        if defined $new_http;
    my @old = workers();
    my %old = map { $_ => 1 } @old;
    my ($rc, $out) = ThrottleTest::nginx_cmd($env, '-s', 'reload');
    is($rc, 0, "$name: nginx -s reload") or diag($out);
    my @new;
    ok(wait_until(2 * $TIMEOUT, sub {
        @new = grep { !$old{$_} } workers();
        @new >= 2;
    }), "$name: new workers started")
        or diag("workers: @{[ workers() ]}\n" . Processes::read_file($env->{log}));
    # an old worker names itself so right before it closes its listening
    # socket; from then on, new connections go to the new workers
    ok(wait_until($TIMEOUT, sub {
        !grep { alive($_) && Processes::read_file("/proc/$_/cmdline")
                                 !~ /shutting down/ } @old
    }), "$name: the old workers are shutting down");
    sleep 0.05;
    return (\@old, \@new);
}

# A request a new worker (one of @$new) answered: probes until one does.
sub probe_new {
    my ($name, $new, $key, $uri) = @_;
    my %new = map { $_ => 1 } @$new;
    my $res;
    wait_until($TIMEOUT, sub {
        $res = probe($env, $key, $uri);
        return $new{ hdr($res, 'X-Pid') // 0 };
    }, 0.1);
    ok($new{ hdr($res, 'X-Pid') // 0 }, "$name: a new worker answers $uri ($key)");
    return $res;
}

# ---------------------------------------------------------------------------
# Cases

case('3 in flight, the 4th refused', ['alice', 'bob'], sub {
    my ($name) = @_;
    is(gauge('streams'), 0, "$name: nginx_throttle_in_flight is 0 at first");
    my @socks = held_n($name, 3, 'alice', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 3 requests of alice in flight");
    is(gauge('streams'), 3, "$name: nginx_throttle_in_flight is 3");
    refused_ok("$name: alice's 4th", 'alice', '/slow?hold=1');
    refused_ok("$name: and 5th", 'alice', '/slow?hold=1');
    is($backend->stats('alice')->{current}, 3,
       "$name: the backend holds 3 of alice's");
    my $bob = probe($env, 'bob', '/slow?ms=0');
    admitted_ok("$name: bob meanwhile", $bob, 2);
    is(gauge('streams'), 3, "$name: the gauge counts bob's ended request no more");

    # one of them ends: its place is free at once
    is($backend->release('alice', 1), 1, "$name: the backend lets the 1st go");
    my $first = finish(shift @socks);
    admitted_ok("$name: the 1st", $first, 2);
    ok($first->{eof}, "$name: nginx closed the 1st's connection");
    my $again = held("$name: right after the 1st ended", 'alice', '/slow?hold=1');
    push @socks, $again if $again;
    ok($again, "$name: a new request takes the freed place at once");
    refused_ok("$name: then the 4th again", 'alice', '/slow?hold=1');

    my @res = release_all('alice', @socks);
    admitted_ok("$name: the 2nd", $res[0], 1);
    admitted_ok("$name: the 3rd", $res[1], 0);
    admitted_ok("$name: the one after the 1st", $res[2], 0) if $res[2];
    ok(wait_until(2, sub { (gauge('streams') // -1) == 0 }),
       "$name: nginx_throttle_in_flight is back to 0");
    is($backend->stats('alice')->{max}, 3,
       "$name: the backend never had more than 3 of alice's");
    three_free_ok($name, 'alice', '/slow?hold=1');
});

case('a client that goes away frees its place', ['carol'], sub {
    my ($name) = @_;
    my @socks = held_n($name, 3, 'carol', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight");
    close $_ for splice @socks, 0, 2;
    ok($backend->wait_current('carol', 1),
       "$name: nginx gave up the 2 requests whose clients left");
    sleep 0.1;    # nginx closes the upstream just before its log phase
    push @socks, held_n("$name: new", 2, 'carol', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 2 new requests take the 2 places");
    refused_ok("$name: the 4th", 'carol', '/slow?hold=1');
    release_all('carol', @socks);
    three_free_ok($name, 'carol', '/slow?hold=1');
});

case('an upstream error (502) frees its place', ['dave'], sub {
    my ($name) = @_;
    my @socks = held_n($name, 2, 'dave', '/slow?hold=1');
    my $bad = probe($env, 'dave', '/slow?fail=1&ms=100');
    is(status_of($bad), 502, "$name: the 3rd gets 502");
    is(hdr($bad, 'X-Status'), 'PASSED', "$name: ... after it was admitted");
    ok($bad->{eof}, "$name: ... and its connection is closed");
    my $next = held("$name: right after", 'dave', '/slow?hold=1');
    push @socks, $next if $next;
    ok($next, "$name: the 502's place is free at once");
    refused_ok("$name: the 4th", 'dave', '/slow?hold=1');
    release_all('dave', @socks);
    three_free_ok($name, 'dave', '/slow?hold=1');
});

case('an upstream timeout (504) frees its place', ['erin'], sub {
    my ($name) = @_;
    my @socks = held_n($name, 2, 'erin', '/slow?hold=1');
    my $late = probe($env, 'erin', '/timeout?ms=4000');
    is(status_of($late), 504, "$name: the 3rd gets 504 (proxy_read_timeout 1s)");
    ok($late->{eof}, "$name: ... and its connection is closed");
    my $next = held("$name: right after", 'erin', '/slow?hold=1');
    push @socks, $next if $next;
    ok($next, "$name: the 504's place is free at once");
    refused_ok("$name: the 4th", 'erin', '/slow?hold=1');
    release_all('erin', @socks);
    three_free_ok($name, 'erin', '/slow?hold=1');
});

case('error_page to a throttled location: one place per main request',
     ['frank'], sub {
    my ($name) = @_;
    # /flaky's upstream fails (502); error_page sends the request to
    # /fallback, whose upstream holds it: one request, one place
    my $redirected = send_request($env, 'frank', '/flaky?fail=1&ms=50');
    ok(wait_until($TIMEOUT, sub {
        my $s = $backend->stats('frank');
        $s->{total} == 2 && $s->{current} == 1;
    }), "$name: the request failed at /flaky and is held at /fallback");
    my @socks = held_n("$name: 2 more", 2, 'frank', '/slow?hold=1');
    is(scalar @socks, 2,
       "$name: 2 more requests are admitted (the redirect took 1 place, not 2)");
    refused_ok("$name: the 4th", 'frank', '/slow?hold=1');
    $backend->release('frank');
    my $res = finish($redirected);
    is(status_of($res), 200, "$name: the redirected request ends with /fallback's 200");
    like($res->{body}, qr/^ok frank/, "$name: ... its body");
    finish($_) for @socks;
    three_free_ok("$name: after it ended", 'frank', '/slow?hold=1');
});

case('a request longer than its lease keeps its place', ['gina'], sub {
    my ($name) = @_;
    my @socks = held_n($name, 3, 'gina', '/short?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight (lease=2s)");
    my $t0 = time;
    my @statuses;
    while (time - $t0 < 5) {    # 2.5 leases
        sleep 0.5;
        my $res = probe($env, 'gina', '/short?ms=0');
        push @statuses, status_of($res);
    }
    is(join(' ', grep { $_ ne '429' } @statuses), '',
       "$name: the 4th is refused all along 5 s (" . @statuses . ' tries)');
    is($backend->stats('gina')->{max}, 3, "$name: never more than 3 in flight");
    my @res = release_all('gina', @socks);
    for my $i (0 .. $#res) {
        admitted_ok("$name: #" . ($i + 1) . ' after 5 s', $res[$i], 2 - $i,
                    'short');
    }
    three_free_ok("$name: after they ended", 'gina', '/short?hold=1');
});

case('a rate zone refusing takes no place', ['hank'], sub {
    my ($name) = @_;
    # rl: 2 requests a minute; streams: 3 at once
    my @socks = held_n($name, 2, 'hank', '/both?hold=1');
    is(scalar @socks, 2, "$name: 2 admitted by both zones");
    my ($sock, $res) = hold($env, $backend, 'hank', '/both?hold=1');
    push @socks, $sock if $sock;
    is(status_of($res // {}), 429, "$name: the 3rd is refused by the rate zone");
    like(hdr($res // {}, 'RateLimit') // '', qr/^"rl";r=0;t=\d+$/,
         "$name: ... which its RateLimit names");
    my $third = held("$name: /slow", 'hank', '/slow?hold=1');
    push @socks, $third if $third;
    ok($third, "$name: the place it did not take is free");
    refused_ok("$name: the 4th in flight", 'hank', '/slow?hold=1');
    release_all('hank', @socks);
});

case('a concurrent zone refusing charges no rate zone', ['ivy'], sub {
    my ($name) = @_;
    # rl4: 4 requests a minute; streams: 3 at once
    my @socks = held_n($name, 3, 'ivy', '/both4?hold=1');
    is(scalar @socks, 3, "$name: 3 admitted by both zones");
    refused_ok("$name: the 4th, refused by the concurrent zone", 'ivy',
               '/both4?hold=1');
    release_all('ivy', @socks);
    my $res = probe($env, 'ivy', '/both4?ms=0');
    is(status_of($res), 200,
       "$name: once they ended, the rate zone still has its 4th unit");
    like(hdr($res, 'RateLimit') // '', qr/^"rl4";r=0;t=\d+$/,
         "$name: ... its last (the binding zone)");
    $res = probe($env, 'ivy', '/both4?ms=0');
    is(status_of($res), 429, "$name: then the rate zone refuses");
    like(hdr($res, 'RateLimit') // '', qr/^"rl4";r=0;t=\d+$/,
         "$name: ... and says so");
});

case('reload with requests in flight', ['jack', 'kate'], sub {
    my ($name) = @_;
    my @jack = held_n("$name: jack", 3, 'jack', '/slow?hold=1');
    my @kate = held_n("$name: kate", 3, 'kate', '/short?hold=1');
    is(scalar(@jack) + scalar(@kate), 6, "$name: 3 + 3 in flight");
    my ($old, $new) = reload_in_flight($name);
    my @old = @$old;
    ok(scalar(grep { alive($_) } @old),
       "$name: the old workers still serve their requests");

    # the new workers see the old ones' places
    my $res = probe_new($name, $new, 'jack', '/slow?ms=0');
    is(status_of($res), 429, "$name: a new worker refuses jack's 4th");

    # past a lease, the old workers still hold kate's places
    my $t0 = time;
    my @statuses;
    while (time - $t0 < 3) {    # 1.5 leases
        sleep 0.5;
        push @statuses, status_of(probe($env, 'kate', '/short?ms=0'));
    }
    is(join(' ', grep { $_ ne '429' } @statuses), '',
       "$name: kate's 4th is refused for 3 s (1.5 leases; "
       . @statuses . ' tries)');

    my @res = (release_all('jack', @jack), release_all('kate', @kate));
    is(join(' ', map { status_of($_) } @res), '200 200 200 200 200 200',
       "$name: the old workers' requests end with 200");
    ok(wait_gone(2 * $TIMEOUT, @old), "$name: the old workers exit");
    three_free_ok("$name: jack, after", 'jack', '/slow?hold=1');
    three_free_ok("$name: kate, after", 'kate', '/short?hold=1');
    is($backend->stats('jack')->{max}, 3, "$name: never more than 3 of jack's");
    is($backend->stats('kate')->{max}, 3, "$name: never more than 3 of kate's");
});

case('SIGKILL of the workers holding the places', ['liam'], sub {
    my ($name) = @_;
    my $lease = 2;
    my @socks = held_n($name, 3, 'liam', '/short?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight (lease=2s)");
    refused_ok("$name: the 4th before", 'liam', '/short?hold=1', 'short');

    # the workers with the upstream connections of liam's requests
    my @workers = workers();
    my %theirs = map { $_ => 1 } @{ $backend->stats('liam')->{ports} };
    my @by = local_ports_by(map { [$_] } @workers);
    my @victims = map { $workers[$_] }
                  grep { grep { $theirs{$_} } @{ $by[$_] } } 0 .. $#workers;
    ok(@victims, "$name: the workers holding liam's requests: @victims");
    my %before = map { $_ => 1 } @workers;

    my $t0 = time;
    kill 'KILL', @victims;
    push @killed, @victims;
    close $_ for @socks;

    # probe every 100 ms until a request of liam's is admitted
    my ($freed, @statuses);
    while (time - $t0 < 3 * $lease) {
        my $sent = time - $t0;
        my $res = probe($env, 'liam', '/short?ms=0');
        push @statuses, status_of($res);
        if (status_of($res) eq '200') {
            $freed = $sent;
            last;
        }
        sleep 0.1;
    }
    my @odd = grep { $_ ne '429' && $_ ne '200' } @statuses;
    is("@odd", '', "$name: every try got 429 until one got 200");
    ok(defined $freed, "$name: the places are freed in the end");
    $freed //= 99;
    my $shown = sprintf '%.2f s', $freed;
    cmp_ok($freed, '>=', $lease / 2 - 0.2,
           "$name: not before half a lease ($shown after the kill)");
    cmp_ok($freed, '<=', $lease * 1.5 + 0.3,
           "$name: within a lease and a half ($shown after the kill)");
    ok(wait_until($TIMEOUT, sub {
        scalar(grep { !$before{$_} } workers()) == @victims
    }), "$name: the master started new workers");
    # the places taken before the first renewal may be counted in two
    # quarter-lease buckets, which end a quarter lease apart: all of them
    # are over by the bound
    my $bound = $lease * 1.5 + 0.3;
    sleep $bound - (time - $t0) if time - $t0 < $bound;
    three_free_ok("$name: all 3, " . $bound . ' s after the kill', 'liam',
                  '/short?hold=1');
    ok(wait_until(2, sub { (gauge('short') // -1) == 0 }),
       "$name: nginx_throttle_in_flight for short is back to 0")
        or diag('gauge: ' . (gauge('short') // 'none'));
});

case('a reload that raises concurrent= applies at once', ['mona'], sub {
    my ($name) = @_;
    my @socks = held_n($name, 3, 'mona', '/slow?hold=1');
    is(scalar @socks, 3, "$name: 3 in flight at concurrent=3");
    (my $http4 = $http) =~ s/(zone=streams:1m) concurrent=3;/$1 concurrent=4;/
        or die "no streams zone in the configuration\n";
    reload_in_flight($name, $http4);
    my $fourth = held("$name: a 4th", 'mona', '/slow?hold=1');
    push @socks, $fourth if $fourth;
    ok($fourth, "$name: the new limit admits a 4th while the 3 are held");
    ConcurrentChecks::refused_ok("$name: the 5th", $env, 'mona', '/slow?hold=1',
                                 'streams', 4);
    my @res = release_all('mona', @socks);
    is(join(' ', map { status_of($_) } @res), '200 200 200 200',
       "$name: all 4 end with 200");
    ConcurrentChecks::admitted_ok("$name: the 4th", $res[3], 0, 'streams', 4)
        if $res[3];
    my @again = held_n("$name: then", 4, 'mona', '/slow?hold=1');
    is(scalar @again, 4, "$name: 4 in flight again, none counted twice");
    ConcurrentChecks::refused_ok("$name: then the 5th", $env, 'mona',
                                 '/slow?hold=1', 'streams', 4);
    release_all('mona', @again);
    is($backend->stats('mona')->{max}, 4, "$name: never more than 4 in flight");
});

my $log = stop_instance($env);
$log =~ s/^.*\bworker process $_ exited on signal 9\b.*\n//mg for @killed;
unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
       'no crash, alert or crit in error.log');

# ---------------------------------------------------------------------------
# throttle_api does not check concurrent zones (an nginx of its own, so
# that the cases above do not depend on it)

{
    my $name = 'throttle_api and a concurrent zone';
    my @logs = with_instances($name, 1, {
        http_config => <<'HTTP',
throttle_zone $http_x_key zone=streams:1m concurrent=3;
throttle_zone $http_x_key zone=rl:1m rate=1r/m burst=1;
HTTP
        config => <<'SERVER',
location = /throttle {
    throttle_api zones=rl,streams;
}
SERVER
    }, sub {
        my ($api) = @_;
        my $res = http_request($api, 'GET /throttle?zone=streams&key=a');
        is(status_of($res), 400, "$name: GET: 400");
        like(json_error($res), qr/concurrent/,
             "$name: GET: a JSON error that says concurrent");
        my $body = '{"checks":[{"zone":"rl","key":"a"},'
                 . '{"zone":"streams","key":"a"}]}';
        $res = http_request($api, 'POST /throttle',
                            'Content-Type' => 'application/json', \$body);
        is(status_of($res), 400, "$name: POST with a rate zone too: 400");
        like(json_error($res), qr/concurrent/,
             "$name: POST: a JSON error that says concurrent");
        $res = http_request($api, 'GET /throttle?zone=rl&key=a&cost=0');
        like($res->{body}, qr/"remaining":2\b/,
             "$name: the refused POST charged the rate zone nothing");
    });
    unlike($logs[0], qr/exited on signal|\[alert\]|\[crit\]/,
           "$name: no crash, alert or crit in error.log");
}

$backend->stop;
done_testing();
