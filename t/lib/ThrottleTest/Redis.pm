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

Each is killed at the end of the block (and by END blocks if the test
dies). Perl steps see them as C<$redis>, C<$redis2>, C<@redis>.

=cut

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use RedisServer;
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd);

our @EXPORT_OK = qw(start_redis stop_redis require_redis_module);

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
            my @conf = grep { length } map { s/^\s+|\s+$//gr }
                       split /;/, $2 // '';
            $server = RedisServer->start(conf => \@conf,
                                         tls  => $1 eq 'tls');
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

sub stop_redis {
    my ($env) = @_;
    $_->stop for @{ delete $env->{redis} || [] };
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
