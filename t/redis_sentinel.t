# SPDX-License-Identifier: BSD-2-Clause
# sentinel= backends against real Sentinels (a master, a replica and three
# redis-server --sentinel, t/lib/RedisSentinel.pm), one nginx (2 workers):
#
# - strict and async zones decide through the master the Sentinels name;
# - SENTINEL FAILOVER, then SIGKILL of the (new) master, each under
#   traffic: the requests of the gap get throttle_on_error within
#   timeout, decisions resume within a few seconds without reload, and
#   limits are exact before and after (the keys were replicated before
#   the switch: no write lost);
# - master= a name the Sentinels do not know, and Sentinels that do not
#   answer: clear log lines, throttle_on_error;
# - password= with sentinel_password=, over TLS (a setup of its own);
# - failover timing: five kills of the master under steady traffic, each
#   time every key decided again within 250 ms of the Sentinels announcing
#   the new master (+switch-master, as a subscriber hears it).
#
# Plain Test::More: one setup serves the first parts (3 s to start).

use strict;
use warnings;

use Test::More;
use Time::HiRes qw(sleep time);

use Processes qw(children_of free_port);
use RedisSentinel;
use ThrottleTest;
use Clock qw(hour_guard);
use ClusterTraffic qw(at_once tally no_crash traffic_around
                      show part burst_is_exact);
use Failover qw(when_announced steady_rounds back_after median worst);

require_redis_module();

my $LIMIT = 5;          # rate=1r/h burst=4
my $SENT = 2 * $LIMIT + 2;  # requests per key in a burst
my $TIMEOUT_MS = 500;   # the backends' timeout=
my $RESUME = 5;         # s: decisions again after a failover began

sub http_config {
    my ($sentinels, $options) = @_;
    my $nobody = join ',', map { '127.0.0.1:' . free_port() } 1 .. 2;
    my $t = "timeout=${TIMEOUT_MS}ms connect_timeout=${TIMEOUT_MS}ms $options";
    return <<"HTTP";
throttle_redis main sentinel=$sentinels master=mymaster $t;
throttle_redis unknown sentinel=$sentinels master=nosuch $t;
throttle_redis nobody sentinel=$nobody master=mymaster $t;
throttle_zone \$http_x_key zone=gcra:1m rate=1r/h burst=4 redis=main;
throttle_zone \$http_x_key zone=sl:1m rate=1r/h burst=4 algorithm=sliding_log redis=main;
throttle_zone \$http_x_key zone=many:1m rate=1r/h burst=99999 redis=main;
throttle_zone \$http_x_key zone=async:1m rate=1r/m burst=9 redis=main sync=async;
throttle_zone \$http_x_key zone=unknown:1m rate=1r/h redis=unknown;
throttle_zone \$http_x_key zone=nobody:1m rate=1r/h redis=nobody;
HTTP
}

my $SERVER = <<'SERVER';
add_header X-Status $throttle_status always;
location = /gcra    { throttle zone=gcra;    empty_gif; }
location = /sl      { throttle zone=sl;      empty_gif; }
location = /many    { throttle zone=many;    empty_gif; }
location = /async   { throttle zone=async;   empty_gif; }
location = /unknown { throttle zone=unknown; empty_gif; }
location = /nobody  { throttle zone=nobody;  empty_gif; }
SERVER

# $key's strict GCRA state replicated: the replica holds the master's value.
sub replicated {
    my ($sentinel, $key) = @_;
    return ThrottleTest::Step::wait_until(3, sub {
        my $v = $sentinel->master->cmd('GET', $key);
        return defined $v && ($sentinel->replica->cmd('GET', $key) // '') eq $v;
    });
}

# A switch of master under traffic ($switch starts it, $finish waits for
# it; keys named after $tag): the gap's requests get ERROR_ALLOWED within timeout, decisions
# resume within $RESUME s; a key charged 3 of 5 before (and replicated)
# has exactly 2 left after; fresh keys get exactly the limit.
sub switch_under_traffic {
    my ($label, $tag, $sentinel, $node, $switch, $finish) = @_;
    my @workers = children_of($node->{master});
    my $pre = "pre-$tag";
    at_once(map { [$node, '/gcra', $pre] } 1 .. 3);
    ok(replicated($sentinel, "throttle:gcra:{$pre}"), "$label: charged key replicated")
        or diag(explain [$sentinel->master->keys_matching('throttle:*')]);
    my ($res, $began) = traffic_around([$node], '/many', [map { "$tag-$_" } 1 .. 4],
                                       1 + $RESUME + 1.5, 1, $switch);
    $finish->();
    my @gap = grep { $_->{at} >= $began && $_->{x_status} ne 'PASSED' } @$res;
    is(show(grep { $_->{at} < $began && $_->{x_status} ne 'PASSED' } @$res), '',
       "$label: decided before");
    is(show(grep { $_->{x_status} ne 'ERROR_ALLOWED' } @gap), '',
       "$label: in the gap, throttle_on_error (" . scalar(@gap) . ' requests)');
    my ($slowest) = sort { $b <=> $a } map { $_->{elapsed} } @gap;
    cmp_ok($slowest // 0, '<', $TIMEOUT_MS / 1000 + 0.5, "$label: ... within timeout");
    is(show(grep { $_->{at} >= $began + $RESUME && $_->{x_status} ne 'PASSED' } @$res), '',
       "$label: decisions resume within $RESUME s");
    cmp_ok(scalar(grep { $_->{at} >= $began + $RESUME } @$res), '>', 0,
           "$label: ... (requests were sent after that)");
    burst_is_exact("$label: the key charged before", [$node], '/gcra', $SENT, 2, $pre);
    burst_is_exact("$label: fresh keys after", [$node], '/gcra', $SENT, $LIMIT, "$tag-a", "$tag-b");
    is("@{[ children_of($node->{master}) ]}", "@workers", "$label: no reload, no crash");
}

part('one sentinel setup', sub {
    my $sentinel = RedisSentinel->start;
    my $node = start_instance(http_config => http_config($sentinel->sentinels, ''),
                              config => $SERVER);
    hour_guard(40);
    burst_is_exact('strict', [$node], '/gcra', $SENT, $LIMIT, qw(k1 k2 k3));
    burst_is_exact('strict sliding_log', [$node], '/sl', $SENT, $LIMIT, qw(k1 k2));
    is(join(',', $sentinel->master->keys_matching('throttle:gcra:*')),
       'throttle:gcra:{k1},throttle:gcra:{k2},throttle:gcra:{k3}',
       'strict: the keys are on the master');
    my $t = tally(at_once(map { [$node, '/async', 'a1'] } 1 .. 12));
    is_deeply($t->{admitted}, { a1 => 10 }, 'async: burst+1 of 12 at once');
    ok(ThrottleTest::Step::wait_until(3, sub {
        my ($key) = $sentinel->master->keys_matching('throttle:*async*a1');
        my $tat = $key && $sentinel->master->cmd('GET', $key) // return 0;
        my $units = ($tat - $sentinel->master->time_us) / 60e6;
        return $units > 9 && $units <= 10;
    }), 'async: the 10 units reach the master');

    # the whole failover, old master made a replica included, is the
    # switch: a client that stays with the old master meets READONLY
    switch_under_traffic('SENTINEL FAILOVER', 'fo', $sentinel, $node,
                         sub { $sentinel->failover }, sub { });
    switch_under_traffic('SIGKILL of the master', 'kill', $sentinel, $node,
                         sub { $sentinel->kill_master },
                         sub { $sentinel->wait_for_new_master });

    my @r = at_once([$node, '/unknown', 'u'], [$node, '/nobody', 'n']);
    is(join(' ', map { "$_->{status} $_->{x_status}" } @r), '200 ERROR_ALLOWED 200 ERROR_ALLOWED',
       'master= unknown, no sentinel answering: throttle_on_error');
    my $log = no_crash($node, 'sentinel');
    like($log, qr/sentinels do not know master\W+nosuch/,
         'the log says: sentinels do not know master nosuch');
    like($log, qr/no sentinel answered/, 'the log says: no sentinel answered');
    unlike($log, qr/sentinels do not know master\W+mymaster/,
           'mymaster is never said unknown');
    $sentinel->stop;
});

# Kills of the master under steady traffic (30 keys, a request each every
# 50 ms): each time, the seconds from "+switch-master" to the first round
# after which no request fell to throttle_on_error; the killed master then
# comes back as the replica.
part('failover timing', sub {
    my $sentinel = RedisSentinel->start;
    my $node = start_instance(http_config => http_config($sentinel->sentinels, ''),
                              config => $SERVER);
    my @keys = map { "ft-$_" } 1 .. 30;
    my @back;
    for my $kill (1 .. 5) {
        my $announced = when_announced($sentinel->{sentinel}[0]->port,
                                       $sentinel->master_name);
        my ($rounds, $killed) = steady_rounds([$node], '/many', \@keys, 8, 0.05, 1,
                                              sub { $sentinel->kill_master });
        my $at = $announced->();
        ok($at, "failover timing, kill $kill: +switch-master announced") or last;
        my $back = back_after($rounds, $at);
        ok(defined $back, "failover timing, kill $kill: decisions came back") or do {
            diag(sprintf "announced %.3f s after the kill; errors in the last rounds: %s",
                 $at - $killed, join ' ', map { $_->{errors} } @$rounds[-10 .. -1]);
            last;
        };
        cmp_ok($back, '<=', 0.25, "failover timing, kill $kill: every key decided again "
               . 'within 250 ms of the announcement (s)');
        push @back, $back;
        $sentinel->wait_for_new_master;
        $sentinel->revive;
    }
    note(sprintf 'failover timing: decisions back %s ms after +switch-master; median %.0f, worst %.0f',
         join(' ', map { sprintf '%.0f', $_ * 1000 } @back), median(@back) * 1000, worst(@back) * 1000)
        if @back;
    no_crash($node, 'failover timing');
    $sentinel->stop;
});

part('passwords and tls', sub {
    my $sentinel = RedisSentinel->start(tls => 1, password => 's3cret',
                                        sentinel_password => 'watch');
    my $ca = $sentinel->tls->{ca};
    my $node = start_instance(
        http_config => http_config($sentinel->sentinels,
            "password=s3cret sentinel_password=watch tls tls_trusted_certificate=$ca"),
        config => $SERVER);
    hour_guard(10);
    burst_is_exact('tls, passwords', [$node], '/gcra', $SENT, $LIMIT, qw(t1 t2));
    $sentinel->failover;
    ok(ThrottleTest::Step::wait_until($RESUME, sub {
        (at_once([$node, '/gcra', 't3']))[0]{x_status} eq 'PASSED'
    }), 'tls, passwords: decisions resume after SENTINEL FAILOVER');
    burst_is_exact('tls, passwords, after the failover', [$node], '/gcra', $SENT, $LIMIT - 1, 't3');
    no_crash($node, 'tls, passwords');
    $sentinel->stop;
});

done_testing();
