# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest;

# Integration test runner for ngx_http_throttle_module: real nginx, real
# shared memory, raw HTTP over loopback. This is what the .t files use;
# the work is done by the modules under ThrottleTest/, each with its part
# of the manual (perldoc t/lib/ThrottleTest.pm says which).

=head1 NAME

ThrottleTest - data-driven integration tests for ngx_http_throttle_module

=head1 SYNOPSIS

    use lib 't/lib';
    use ThrottleTest;
    run_blocks();

    __DATA__

    === TEST 1: the 17th request is rejected
    --- http_config
    throttle_zone $http_x_key zone=reply:1m rate=30r/m burst=15;
    --- config
    location / {
        throttle zone=reply;
    }
    --- requests
    GET /a.txt x16 => 200
      > X-Key: alice
    GET /a.txt => 429
      > X-Key: alice
      Retry-After: 2
      RateLimit: "reply";r=0;t=32
    --- error_log
    throttled by zone "reply", retry after

Run with C<TEST_NGINX_BINARY=/usr/sbin/nginx
TEST_THROTTLE_MODULE=build/ngx_http_throttle_module.so prove -I t/lib t/*.t>
(C<make integration>). C<TEST_THROTTLE_TIMEOUT> (default 5) bounds every
wait in seconds. C<TEST_THROTTLE_KEEP_LOGS=DIR> keeps the error.log (and
Redis logs) of every block that had a failure in DIR.

=head1 THE MANUAL

The rest of the manual sits with the code it describes, in the modules
that do the work (C<perldoc t/lib/ThrottleTest/Blocks.pm>...):

=over

=item ThrottleTest::Blocks

SECTIONS: what a block may have, and how a block runs. SHARED BY THE
BLOCKS OF A FILE: a file's default configuration sections and its
C<@NAME> fragments, before its first block.

=item ThrottleTest::Nginx

WHAT EACH BLOCK GETS: the prefix, docroot and configuration of a block's
nginx, how it is started and stopped.

=item ThrottleTest::Requests

REQUESTS: the syntax of C<--- requests>.

=item ThrottleTest::Step

PERL STEPS: what the code of a C<perl> step sees.

=item ThrottleTest::Redis

THE REDIS SECTION: the servers C<--- redis> starts.

=item ThrottleTest::Http, Processes, RedisServer

The HTTP client; the process, port and file helpers shared with
RedisServer; real Redis servers, fakes and the RESP client
(F<t/lib/Processes.pm>, F<t/lib/RedisServer.pm>).

=item Responses, RedisChecks, Clock, Flood

Helpers shared by test files: readers of responses (C<hdr>,
C<status_of>, C<count_statuses>, C<fmt_counts>), what Redis holds for a
zone (C<async_key>, C<all_expire>), waits for the turn of the hour or
minute (C<hour_guard>, C<minute_guard>), floods (pipelined and forked
clients, wrk, what one exact funnel admits of a flood). Each file's
header says more.

=back

=head1 FUNCTIONS FOR PLAIN SCRIPTS

For tests that are not blocks (two nginx instances, say):

    my $n = start_instance(http_config => ..., config => ...,
                           main_config => ...,     # dies if nginx fails
                           redis_servers => [$r]); # for $TEST_REDIS_PORT
    my $res = http_request($n, 'GET /a.txt', 'X-Key' => 'a');
    my @res = http_parallel($n, 20, 'GET /a.txt', 'X-Key' => 'a');
    my $log = stop_instance($n);                   # error.log text
    my ($of_n, $of_m) = worker_ports($n, $m);   # per instance, an
                                    # array of its workers' sockets' local
                                    # ports (whose Redis connection is
                                    # whose)
    my @logs = with_instances('two nodes', 2, \%sections,
                              sub { my @nodes = @_; ... });
                                    # started for the code, stopped after
                                    # it (a die: a failed test); returns
                                    # their error.logs

C<require_redis_module()> skips the whole file when the module does not
know C<throttle_redis> yet, and fails it when redis-server is missing.

C<module_version()> is the module's version, as
F<ngx_module/base/ngx_http_throttle_conf.h> defines it.

=cut

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use Processes qw(read_file children_of local_ports_by);
use ThrottleTest::Blocks qw(run_blocks);
use ThrottleTest::Http qw(http_request http_parallel connect_to http_read);
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd start_nginx stop_nginx);
use ThrottleTest::Redis qw(require_redis_module);

our @EXPORT = qw(run_blocks start_instance stop_instance with_instances
                 http_request http_parallel require_redis_module
                 worker_ports module_version);

# Test files also call ThrottleTest::connect_to, ThrottleTest::http_read
# and ThrottleTest::nginx_cmd, imported above.

# A plain script's nginx: the same configuration template as a block.
sub start_instance {
    my (%sec) = @_;
    check_binaries();
    my $env = setup_prefix(\%sec);
    $env->{redis} = $sec{redis_servers} if $sec{redis_servers};
    write_config($env, $sec{main_config}, $sec{http_config}, $sec{config});
    my ($master, $err) = start_nginx($env);
    if (!$master || $err) {
        stop_nginx($master) if $master;
        die "nginx does not start: $err\n";
    }
    $env->{master} = $master;
    return $env;
}

sub stop_instance {
    my ($env) = @_;
    stop_nginx(delete $env->{master}) if $env->{master};
    return read_file($env->{log});
}

# $count instances of one configuration for $code; each is stopped even
# when $code (or starting the next one) dies, which fails a test named
# after $label. Returns their error.logs.
sub with_instances {
    my ($label, $count, $sections, $code) = @_;
    my @nodes;
    my $ok = eval {
        push @nodes, start_instance(%$sections) for 1 .. $count;
        $code->(@nodes);
        1;
    };
    unless ($ok) {
        Test::More::fail("$label: the tests ran to the end");
        Test::More::diag($@);
    }
    return map { stop_instance($_) } @nodes;
}

sub module_version {
    my $header = "$FindBin::Bin/../ngx_module/base/ngx_http_throttle_conf.h";
    my ($version) = read_file($header)
        =~ /^#define NGX_HTTP_THROTTLE_VERSION "([^"]+)"$/m
        or die "no NGX_HTTP_THROTTLE_VERSION in $header\n";
    return $version;
}

sub worker_ports {
    my (@envs) = @_;
    return local_ports_by(map { [children_of($_->{master})] } @envs);
}

1;
