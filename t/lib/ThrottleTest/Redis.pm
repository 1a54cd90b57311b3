# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Redis;

# The Redis servers of a block (--- redis): started from the section's
# lines before nginx, stopped after it; and require_redis_module() for the
# test files that need Redis. The servers themselves are RedisServer's.

=head1 THE REDIS SECTION

C<--- redis>: servers to start before nginx (and stop after it), one per line; their
ports replace C<$TEST_REDIS_PORT> (first line), C<$TEST_REDIS_PORT_2>,
C<$TEST_REDIS_PORT_3>... in the configuration sections:

    redis                              a real redis-server (RedisServer.pm)
    redis: requirepass s; user a on >p ~* &* +@all
                                       the same, with redis.conf lines
                                       (separated by ";")
    tls                                TLS only (--port 0 --tls-port P); a
    tls: CONF; CONF                    CA and a localhost/127.0.0.1 cert;
                                       $TEST_REDIS_TLS_DIR is the directory
                                       of the first one's ca.pem,
                                       other-ca.pem (an unrelated CA)
    fake garbage                       a TCP server answering non-RESP bytes
    fake silent                        one that accepts and never answers
    fake ok                            one answering +OK to every command
    fake short                         +OK, but a 2-element array to
                                       EVALSHA / EVAL
    closed                             a port where nothing listens
    cluster                            a Redis Cluster: 3 masters + 3
    cluster: CONF; CONF                replicas (RedisCluster.pm), the
    cluster tls                        lines added to every node's
    cluster tls: CONF; CONF            redis.conf; tls: TLS only
    sentinel                           a master, a replica and three
    sentinel: password=P, sentinel_password=S
    sentinel tls                       Sentinels (RedisSentinel.pm),
    sentinel tls: password=P           master name "mymaster"; options
                                       as RedisSentinel's start takes
                                       them (name=value, by "," or " ")

Each is killed at the end of the block (and by END blocks if the test
dies). Perl steps see them as C<$redis>, C<$redis2>, C<@redis>; the
first cluster as C<$cluster>, the first sentinel setup as C<$sentinel>.

A cluster or sentinel setup takes seconds to start, so one is kept for
the next block of the file with the very same line: emptied (FLUSHALL)
and its command counts zeroed (CONFIG RESETSTAT) instead of stopped.
One whose master a block killed is stopped as usual.

The configuration sections may use C<$TEST_REDIS_CLUSTER> (the nodes'
addresses, for C<cluster=>), C<$TEST_REDIS_SENTINELS> (for C<sentinel=>)
and C<$TEST_REDIS_MASTER_NAME> (for C<master=>); C<$TEST_REDIS_TLS_DIR>
is that of a TLS cluster or sentinel setup too.

=cut

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use RedisServer;
use RedisCluster;
use RedisSentinel;
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd);

our @EXPORT_OK = qw(start_redis stop_redis require_redis_module);

my %kept;    # line => a cluster or sentinel setup kept for the next block

# Starts the servers of the section into $env->{redis}, in order; dies
# when a line does not parse or a server does not start.
sub start_redis {
    my ($env, $text) = @_;
    $env->{redis} = [];
    for my $line (split /\n/, $text) {
        next if $line =~ /^\s*(#|$)/;
        $line =~ s/^\s+|\s+$//g;
        my $server;
        if ($line =~ /^(redis|tls)(?:\s*:\s*(.*))?$/) {
            $server = RedisServer->start(conf => conf_lines($2),
                                         tls  => $1 eq 'tls');
        } elsif ($line =~ /^(cluster|sentinel)(\s+tls)?(?:\s*:\s*(.*))?$/) {
            $server = delete $kept{$line};
            $server = $server ? $server->reset
                              : start_group($1, !!$2, $3 // '');
            $env->{kept_line}{$server} = $line;
        } elsif ($line =~ /^fake\s+(\w+)$/) {
            $server = RedisServer::Fake->start($1);
        } elsif ($line eq 'closed') {
            $server = RedisServer::Closed->new;
        } else {
            die "--- redis: cannot parse line: $line\n";
        }
        push @{ $env->{redis} }, $server;
    }
}

# redis.conf lines separated by ";".
sub conf_lines {
    my ($text) = @_;
    return [grep { length } map { s/^\s+|\s+$//gr } split /;/, $text // ''];
}

# A cluster (the options: redis.conf lines) or a sentinel setup (the
# options: name=value).
sub start_group {
    my ($kind, $tls, $options) = @_;
    return RedisCluster->start(tls => $tls, conf => conf_lines($options))
        if $kind eq 'cluster';
    my %o = map { /^(\w+)=(.*)$/ ? ($1 => $2)
                                 : die "--- redis: not name=value: $_\n" }
            grep { length } split /[,\s]+/, $options;
    return RedisSentinel->start(%o, tls => $tls);
}

# Stops the block's servers; an intact cluster or sentinel setup is kept
# for the next block with the same line.
sub stop_redis {
    my ($env) = @_;
    for my $server (@{ delete $env->{redis} || [] }) {
        my $line = $env->{kept_line}{$server};
        if (defined $line && $server->intact && !$kept{$line}) {
            $kept{$line} = $server;
        } else {
            $server->stop;
        }
    }
}

# Skips the file (skip_all) when the module does not know throttle_redis
# yet; fails it when the module does but redis-server is missing.
sub require_redis_module {
    check_binaries();
    my $env = setup_prefix({});
    write_config($env, '', "throttle_redis probe server=127.0.0.1:1;", '');
    my ($rc, $out) = nginx_cmd($env, '-t');
    if ($out =~ /unknown directive "throttle_redis"/) {
        Test::More::plan skip_all => 'the module has no throttle_redis yet';
    }
    Test::More::BAIL_OUT(
        'redis-server/redis-cli missing: apt-get install redis-server')
        unless RedisServer::available();
}

1;
