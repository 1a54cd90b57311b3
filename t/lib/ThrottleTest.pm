package ThrottleTest;

# Integration test runner for ngx_http_throttle_module: real nginx, real
# shared memory, raw HTTP over loopback. The POD below is the manual
# (perldoc t/lib/ThrottleTest.pm).

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

=head1 WHAT EACH BLOCK GETS

In L<ThrottleTest::Nginx> (F<t/lib/ThrottleTest/Nginx.pm>).

=head1 SECTIONS

Parsed by Test::Base: C<=== name> starts a block, C<--- section> a
section; C<--- section: value> is a one-line section. Test::Base filters
apply, e.g. C<--- requests eval> evaluates the section as Perl and uses
the result (handy for 64 KiB header values). C<--- ONLY> and C<--- SKIP>
work as in Test::Base.

=over

=item main_config, http_config, config

Text placed at the top level, inside C<http{}>, inside C<server{}>.

=item user_files

Extra docroot files: C<<< >>> path >>> on a line of its own, then the
content.

=item requests

The requests to send, in order, and what each must get back; between
them pauses and perl steps. The syntax is in L<ThrottleTest::Requests>
(F<t/lib/ThrottleTest/Requests.pm>), perl steps in L<ThrottleTest::Step>.

=item error_log, no_error_log

One pattern per line: a literal substring, or C<~ REGEX>. Checked against
the whole error.log once nginx has stopped. Every block also checks that
error.log has no "exited on signal", [alert] or [crit].

=item must_die

nginx must not start: C<nginx -t> must fail and its output must contain
each pattern (same syntax as error_log).

=item distinct

C<Name E<gt>= N> per line: across all responses of the block, header Name
took at least N distinct values (e.g. C<X-Pid E<gt>= 2> with
C<add_header X-Pid $pid always;>: both workers served).

=item reload_main_config, reload_http_config, reload_config

After C<requests>, replace these parts of the configuration (the others
stay), run C<nginx -s reload> and wait until the new workers serve (all
old workers gone) or the master logs an [emerg].

=item reload_fails

The reload must be refused (by the master, or already by C<nginx -s
reload> when the file does not parse); each pattern must be in what was
logged after the reload (plus C<nginx -s reload>'s own output), and the
old workers must still be the ones serving. Without this section the
reload must succeed.

=item requests_after_reload

Requests (same syntax) sent after the reload, whether it succeeded or
was refused.

=item redis

Servers to start before nginx (and stop after it), one per line; their
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

=item todo

C<--- todo: reason>: every test of the block is TODO (a known module
bug; the suite stays green and reports it); in a must_die block, only the
message checks. A C<todo: reason> line under a request makes only that
request's checks TODO.

=back

=head1 PERL STEPS

In L<ThrottleTest::Step> (F<t/lib/ThrottleTest/Step.pm>).

=head1 FUNCTIONS FOR PLAIN SCRIPTS

For tests that are not blocks (two nginx instances, say):

    my $n = start_instance(http_config => ..., config => ...,
                           main_config => ...,     # dies if nginx fails
                           redis_servers => [$r]); # for $TEST_REDIS_PORT
    my $res = http_request($n, 'GET /a.txt', 'X-Key' => 'a');
    my @res = http_parallel($n, 20, 'GET /a.txt', 'X-Key' => 'a');
    my $log = stop_instance($n);                   # error.log text

C<require_redis_module()> skips the whole file when the module does not
know C<throttle_redis> yet, and fails it when redis-server is missing.

=cut

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path);
use Test::Base ();    # only its data-block parser; assertions: Test::More
use Test::More;
use Processes qw(read_file children_of);
use RedisServer;
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd start_nginx stop_nginx reload_nginx);
use ThrottleTest::Http qw(http_request http_parallel connect_to http_read);
use ThrottleTest::Requests qw(run_requests);

our @EXPORT = qw(run_blocks start_instance stop_instance http_request
                 http_parallel require_redis_module);

# ---------------------------------------------------------------------------
# Entry point

sub run_blocks {
    check_binaries();

    my @blocks = parse_blocks();
    BAIL_OUT("no test blocks found in $0") unless @blocks;

    for my $block (@blocks) {
        run_block($block);
    }

    done_testing();
}

sub parse_blocks {
    my $spec = do {
        no warnings 'once';
        local $/;
        my $fh = \*main::DATA;
        <$fh>;
    };
    return () unless defined $spec;

    my $tb = Test::Base->new;
    $tb->_spec_string($spec);

    my @blocks;
    for my $b (@{ $tb->block_list }) {
        $b->run_filters unless $b->is_filtered;
        my %sec;
        for my $name (@{ $b->_section_order }) {
            my $v = $b->{$name}[0];
            $sec{$name} = defined $v ? $v : '';
        }
        push @blocks, { name => $b->name, sec => \%sec };
    }
    return @blocks;
}

my %KNOWN = map { $_ => 1 } qw(
    main_config http_config config user_files requests
    must_die error_log no_error_log todo distinct
    reload_main_config reload_http_config reload_config
    reload_fails requests_after_reload redis
    ONLY SKIP LAST
);

sub run_block {
    my ($block) = @_;
    my $name = $block->{name};
    my $sec  = $block->{sec};

    my @unknown = grep { !$KNOWN{$_} } sort keys %$sec;
    if (@unknown) {
        fail("$name: known sections");
        diag("unknown section(s): @unknown");
        return;
    }

    my $env = setup_prefix($sec);

    if (defined $sec->{redis}) {
        unless (eval { start_redis($env, $sec->{redis}); 1 }) {
            fail("$name: redis servers start");
            diag($@);
            stop_redis($env);
            return;
        }
    }

    if (defined $sec->{must_die}) {
        check_must_die($name, $env, $sec);
    } else {
        my $builder = Test::More->builder;
        $builder->todo_start($sec->{todo}) if defined $sec->{todo};
        run_server_block($name, $env, $sec);
        $builder->todo_end if defined $sec->{todo};
    }

    stop_redis($env);

    # File::Temp removes the directory when $env->{dir} goes out of scope
}

# ---------------------------------------------------------------------------
# Redis servers of a block (--- redis)

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

# ---------------------------------------------------------------------------
# Block kinds

sub check_must_die {
    my ($name, $env, $sec) = @_;
    write_config($env, $sec->{main_config}, $sec->{http_config},
                 $sec->{config});
    my ($rc, $out) = nginx_cmd($env, '-t');

    ok($rc != 0, "$name: nginx -t fails")
        or diag("nginx -t output:\n$out");

    # a todo covers the message checks only: the failure itself is checked
    my $builder = Test::More->builder;
    $builder->todo_start($sec->{todo}) if defined $sec->{todo};
    for my $pat (pattern_lines($sec->{must_die})) {
        ok(pattern_match($pat, $out),
           "$name: nginx -t output has " . pattern_desc($pat))
            or diag("nginx -t output:\n$out");
    }
    $builder->todo_end if defined $sec->{todo};
}

sub run_server_block {
    my ($name, $env, $sec) = @_;
    my $failures_before = failures();

    write_config($env, $sec->{main_config}, $sec->{http_config},
                 $sec->{config});

    my ($master, $err) = start_nginx($env);
    unless (ok($master && !$err, "$name: nginx starts")) {
        diag($err);
        stop_nginx($master) if $master;
        return;
    }
    $env->{master} = $master;

    run_requests($name, $env, $sec->{requests}) if defined $sec->{requests};

    my $reloads = grep { defined $sec->{$_} }
        qw(reload_main_config reload_http_config reload_config);

    if ($reloads) {
        my $main = $sec->{reload_main_config} // $sec->{main_config};
        my $http = $sec->{reload_http_config} // $sec->{http_config};
        my $srv  = $sec->{reload_config}      // $sec->{config};
        write_config($env, $main, $http, $srv);

        my ($ok, $text, $old) = reload_nginx($env, $master);

        if (defined $sec->{reload_fails}) {
            ok(!$ok, "$name: reload is refused")
                or diag("log since the reload:\n$text");
            for my $pat (pattern_lines($sec->{reload_fails})) {
                ok(pattern_match($pat, $text),
                   "$name: reload refusal says " . pattern_desc($pat))
                    or diag("log since the reload:\n$text");
            }
            is("@{[ children_of($master) ]}", "@$old",
               "$name: the old workers still serve");
        } else {
            ok($ok, "$name: reload succeeds")
                or diag("log since the reload:\n$text");
        }

        run_requests("$name (after reload)", $env,
                     $sec->{requests_after_reload})
            if defined $sec->{requests_after_reload};
    }

    if (defined $sec->{distinct}) {
        for my $line (grep { /\S/ } split /\n/, $sec->{distinct}) {
            my ($h, $min) = $line =~ /^\s*(\S+)\s*>=\s*(\d+)\s*$/
                or BAIL_OUT("$name: bad distinct line: $line");
            my @values = sort keys %{ $env->{seen}{ lc $h } || {} };
            cmp_ok(scalar @values, '>=', $min,
                   "$name: $h took at least $min distinct values")
                or diag("values seen: @values");
        }
    }

    ok(stop_nginx($master), "$name: nginx stops gracefully");

    my $log = read_file($env->{log});
    keep_logs($name, $env, $log) if failures() > $failures_before;

    unlike($log, qr/exited on signal|\[alert\]|\[crit\]/,
           "$name: no crash, alert or crit in error.log");

    for my $pat (pattern_lines($sec->{error_log})) {
        ok(pattern_match($pat, $log),
           "$name: error.log has " . pattern_desc($pat))
            or diag(tail_log($log));
    }
    for my $pat (pattern_lines($sec->{no_error_log})) {
        ok(!pattern_match($pat, $log),
           "$name: error.log has no " . pattern_desc($pat))
            or diag(tail_log($log));
    }
}

# Tests failed so far (TODO failures excluded).
sub failures {
    my @d = Test::More->builder->details;
    return scalar grep { !$_->{ok} } @d;
}

# TEST_THROTTLE_KEEP_LOGS=DIR: a block with a failure leaves a copy of its
# error.log (and its Redis servers' logs) in DIR.
sub keep_logs {
    my ($name, $env, $log) = @_;
    my $dir = $ENV{TEST_THROTTLE_KEEP_LOGS} or return;
    make_path($dir);
    (my $base = "$0 $name") =~ s/[^A-Za-z0-9_.-]+/_/g;
    $base = substr $base, 0, 120;
    open my $fh, '>', "$dir/$base.error.log" or return;
    print $fh $log;
    close $fh;
    my $i = 0;
    for my $r (@{ $env->{redis} || [] }) {
        $i++;
        next unless $r->can('log');
        open my $rf, '>', "$dir/$base.redis$i.log" or next;
        print $rf $r->log;
        close $rf;
    }
    diag("logs kept in $dir/$base.*");
}

sub tail_log {
    my ($log) = @_;
    my @lines = split /\n/, $log;
    @lines = @lines[-30 .. -1] if @lines > 30;
    return "error.log (last lines):\n" . join("\n", @lines);
}

# ---------------------------------------------------------------------------
# Patterns: a line is a literal substring, or "~ REGEX"

sub pattern_lines {
    my ($text) = @_;
    return () unless defined $text;
    my @p;
    for my $line (split /\n/, $text) {
        next if $line =~ /^\s*(#|$)/;
        $line =~ s/^\s+|\s+$//g;
        if ($line =~ /^~\s*(.+)$/) {
            push @p, { re => qr/$1/ };
        } else {
            push @p, { str => $line };
        }
    }
    return @p;
}

sub pattern_match {
    my ($p, $text) = @_;
    return $text =~ $p->{re} if $p->{re};
    return index($text, $p->{str}) >= 0;
}

sub pattern_desc {
    my ($p) = @_;
    return $p->{re} ? "/$p->{re}/" : "\"$p->{str}\"";
}

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

# Skips the file (skip_all) when the module does not know throttle_redis
# yet; fails it when the module does but redis-server is missing.
sub require_redis_module {
    check_binaries();
    my $env = setup_prefix({});
    write_config($env, '', "throttle_redis probe server=127.0.0.1:1;", '');
    my ($rc, $out) = nginx_cmd($env, '-t');
    if ($out =~ /unknown directive "throttle_redis"/) {
        plan skip_all => 'the module has no throttle_redis yet';
    }
    BAIL_OUT('redis-server/redis-cli missing: apt-get install redis-server')
        unless RedisServer::available();
}

1;

