# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Step;

# The package perl steps run in (--- requests "perl:" and "perl { }"), with
# the helpers they call; test files add subs of their own to it. Nothing
# else is imported into it: each name here is one that a step or a test
# file could clash with.

=head1 PERL STEPS

A C<perl> step runs in package C<ThrottleTest::Step> with strict,
warnings, Test::More and Time::HiRes's C<time> and C<sleep>. It sees:

    $name            the block's name (prefix your test names with it)
    $redis, $redis2, @redis   the --- redis servers (RedisServer objects:
                     cmd, calls, pause, resume, restart, stop, kill_hard...)
    $cluster, $sentinel  the first cluster and sentinel setup of --- redis
                     (RedisCluster, RedisSentinel objects), or undef
    $nginx           { port, prefix, log, master, conf, started (its
                     time() before nginx started) }
    %stash           a hash kept across the steps of the block
    request('GET /a.txt', 'X-Key' => 'alice')
                     one request on its own connection; returns { status,
                     headers => { lc name => [values] }, body, elapsed,
                     error }; header($res, 'Name') gives the first value.
                     A reference to a string after the headers is the
                     body: request('POST /u', 'Content-Type' => 'a/b', \$text)
    parallel_requests(N, 'GET /a.txt', 'X-Key' => 'alice')
                     N connections, N requests written at once, then N
                     responses read; a list of responses, {elapsed} counted
                     from the writes
    metrics_text()   GET /metrics (a throttle_metrics location): its
                     text; dies unless a 200
    metrics()        the same, as Prometheus::parse's samples
    error_log()      error.log as it is now
    error_lines()    its lines at [warn] or worse
    flood(SECONDS, BATCH, 'GET /a.txt', 'key-')
                     BATCH requests at once, X-Key key-0, key-1...,
                     again and again for SECONDS; returns { total, took,
                     max (slowest), status => { X-Status value => count } }
    log_rate_ok($name, $flood, $todo)
                     error.log after a flood: logged, not per request, and
                     about once a second per worker ($todo: that check TODO)
    reload()         nginx -s reload, waits as reload_* does; true if it
                     succeeded
    wait_until(SECONDS, sub { ... })   polls every 20 ms; the last result
    all_read()       waits until nginx has read everything sent to it (each
                     request is then as far as it goes at once: waiting for
                     Redis, say); true if it did within $TIMEOUT
    all_closed()     waits until nginx has closed every connection (every
                     request finished); true if it did within $TIMEOUT
    kill_worker()    SIGKILL to one of nginx's workers, then waits until
                     the master has started another; returns (the dead
                     pid, the new one). The block's check for crashes in
                     error.log leaves that worker's death out

C<our $TODO> works (C<local $TODO = 'reason';>). A step that dies is a
failed test named after the step.

=cut

use strict;
use warnings;

use Test::More ();
use Time::HiRes qw(time sleep);
use Processes qw(wait_until);
use Prometheus ();
use Responses ();
use ThrottleTest::Http ();
use ThrottleTest::Nginx ();

our $CURRENT;    # the block's $env while a step runs

sub request { ThrottleTest::Http::http_request($CURRENT, @_) }

sub parallel_requests { ThrottleTest::Http::http_parallel($CURRENT, @_) }

*header = \&Responses::hdr;

sub metrics_text {
    my $res = request('GET /metrics');
    die 'GET /metrics: ' . ($res->{status} // $res->{error}) . "\n"
        unless ($res->{status} // 0) == 200;
    return $res->{body};
}

sub metrics { Prometheus::parse(metrics_text()) }

sub error_log { Processes::read_file($CURRENT->{log}) }

# error.log lines at [warn] or worse
sub error_lines {
    return grep { /\[(warn|error|crit|alert|emerg)\]/ } split /\n/, error_log();
}

# Sends BATCH requests at once (distinct keys: X-Key PREFIX<n>), again and
# again for SECONDS; returns { total, took, max (slowest response),
# status => { $throttle_status (X-Status header) => count } }.
sub flood {
    my ($seconds, $batch, $what, $prefix) = @_;
    my $t0 = time;
    my %f = (total => 0, max => 0, status => {});
    my $n = 0;
    while (time - $t0 < $seconds) {
        for my $res (parallel_requests($batch, $what, 'X-Key' => $prefix . $n++)) {
            $f{total}++;
            $f{status}{ header($res, 'X-Status') // 'none' }++;
            $f{max} = $res->{elapsed} if $res->{elapsed} > $f{max};
        }
    }
    $f{took} = time - $t0;
    return \%f;
}

# After a flood of failures: error.log has at least one line at [warn] or
# worse, far fewer than the failures (at most 40, and at most 1 in 100),
# and, as documented, about one a second per worker: at most
# 2 workers x (seconds + 2) x 2. A $todo marks only that last check TODO.
sub log_rate_ok {
    my ($name, $f, $todo) = @_;
    my @lines = error_lines();
    my $n = @lines;
    my $took = sprintf '%.1f', $f->{took};
    my $show = sub { Test::More::diag(join "\n", @lines[0 .. ($#lines < 30 ? $#lines : 30)]) };
    Test::More::cmp_ok($n, '>=', 1, "$name: the failure is logged");
    my $cap = int($f->{total} / 100);
    $cap = 40 if $cap > 40;
    Test::More::cmp_ok($n, '<=', $cap,
        "$name: $n error lines for $f->{total} failures in $took s: "
        . "not one per request (at most $cap)") or $show->();
    my $limit = 2 * (int($f->{took}) + 2) * 2;
    my $builder = Test::More->builder;
    $builder->todo_start($todo) if $todo;
    Test::More::cmp_ok($n, '<=', $limit,
        "$name: $n error lines in $took s: about one a second per worker "
        . "(at most $limit)") or $show->();
    $builder->todo_end if $todo;
}

sub all_read {
    my $port = $CURRENT->{port};
    return wait_until($Processes::TIMEOUT, sub { Processes::all_read($port) });
}

sub all_closed {
    my $port = $CURRENT->{port};
    return wait_until($Processes::TIMEOUT,
                      sub { !Processes::open_connections($port) });
}

sub kill_worker {
    my $master = $CURRENT->{master};
    my ($victim, @others) = Processes::children_of($master);
    my %before = map { $_ => 1 } $victim, @others;
    push @{ $CURRENT->{killed} }, $victim;
    kill 'KILL', $victim or die "SIGKILL $victim: $!\n";
    my $new;
    wait_until($Processes::TIMEOUT, sub {
        ($new) = grep { !$before{$_} } Processes::children_of($master);
        return $new;
    });
    die "no worker took the place of $victim\n" unless $new;
    return ($victim, $new);
}

sub reload {
    my ($ok, $text) = ThrottleTest::Nginx::reload_nginx($CURRENT, $CURRENT->{master});
    Test::More::diag("reload:\n$text") unless $ok;
    return $ok;
}

1;
