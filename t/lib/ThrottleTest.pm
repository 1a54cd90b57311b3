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

The requests to send, in order, and what each must get back:

    # comment
    [METHOD] /uri [xN] => STATUS       one request (GET by default);
                                       xN sends it N times, each checked
      > Name: value                    a request header to send
      Name: value                      response header, exact value
      Name ~ regex                     response header matching a regex
      no Name                          response header absent
      body: text                       body, exact (one final \n ignored)
      body ~ regex                     body matching a regex
      todo: reason                     this request's checks are TODO
      time < SECONDS                   answered (connect to last byte) in
                                       less than SECONDS
    keepalive {                        the requests up to "}" go on ONE
      ...                              connection (Connection: keep-alive);
    }                                  otherwise each has its own
    sleep SECONDS                      pause (keep it short)
    perl: CODE                         Perl run between requests (below)
    perl {                             the same over several lines, up to
      CODE                             a line that is exactly "}"
    }
    parallel N [METHOD] /uri => 200 x20, 429 x30
      > Name: value                    N connections at once, N requests
                                       sent, then the responses read;
                                       checks how many got each status

A request line may end with C<poll SECONDS> (C<GET /a.txt =E<gt> 200 poll
5>): the request is sent again every 0.1 s until its status and checks
all hold, for at most SECONDS; then the last response is checked as
usual (for "the module recovers" checks; each try is a real request).

Checked headers must appear exactly once. Each request yields one test
for the status and one per check, named after the block, the request
index and the repetition.

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

A C<perl> step runs in package C<ThrottleTest::Step> with strict,
warnings, Test::More and Time::HiRes's C<time> and C<sleep>. It sees:

    $name            the block's name (prefix your test names with it)
    $redis, $redis2, @redis   the --- redis servers (RedisServer objects:
                     cmd, calls, pause, resume, restart, stop, kill_hard...)
    $nginx           { port, prefix, log, master, conf }
    %stash           a hash kept across the steps of the block
    request('GET /a.txt', 'X-Key' => 'alice')
                     one request on its own connection; returns { status,
                     headers => { lc name => [values] }, body, elapsed,
                     error }; header($res, 'Name') gives the first value
    parallel_requests(N, 'GET /a.txt', 'X-Key' => 'alice')
                     N connections, N requests written at once, then N
                     responses read; a list of responses, {elapsed} counted
                     from the writes
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

C<our $TODO> works (C<local $TODO = 'reason';>). A step that dies is a
failed test named after the step.

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
use Time::HiRes qw(sleep time);
use Processes qw(read_file children_of wait_until);
use RedisServer;
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd start_nginx stop_nginx reload_nginx);
use ThrottleTest::Http qw(connect_to http_exchange http_read one_request
                          exchange_parallel http_request http_parallel
                          dump_response);

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

# ---------------------------------------------------------------------------
# Requests

# Parses the --- requests DSL into a list of steps:
#   { type => 'request', ... } | { type => 'keepalive', requests => [...] }
#   | { type => 'sleep', seconds => N }
sub parse_requests {
    my ($name, $text) = @_;
    my @steps;
    my $group;    # open keepalive group
    my $cur;      # request that indented lines attach to
    my $n = 0;
    my $perl;     # open perl { ... } step

    for my $line (split /\n/, $text) {
        if ($perl) {
            if ($line =~ /^\}\s*$/) {
                $perl = undef;
            } else {
                $perl->{code} .= "$line\n";
            }
            next;
        }
        next if $line =~ /^\s*(#.*)?$/;

        if ($line =~ /^\s/) {
            die "$name: indented line with no request: $line\n" unless $cur;
            $line =~ s/^\s+|\s+$//g;
            if ($line =~ /^>\s*([^:\s]+):\s?(.*)$/) {
                push @{ $cur->{send} }, [$1, $2];
            } elsif ($line =~ /^todo\s*:\s*(.+)$/) {
                $cur->{todo} = $1;
            } elsif ($line =~ /^time\s*<\s*([\d.]+)$/) {
                push @{ $cur->{checks} }, { time_lt => $1 };
            } elsif ($line =~ /^no\s+(\S+)$/) {
                push @{ $cur->{checks} }, { header => $1, absent => 1 };
            } elsif ($line =~ /^body\s*:\s?(.*)$/) {
                push @{ $cur->{checks} }, { body => 1, eq => $1 };
            } elsif ($line =~ /^body\s+~\s*(.+)$/) {
                push @{ $cur->{checks} }, { body => 1, re => qr/$1/ };
            } elsif ($line =~ /^([^:\s~]+)\s+~\s*(.+)$/) {
                push @{ $cur->{checks} }, { header => $1, re => qr/$2/ };
            } elsif ($line =~ /^([^:\s~]+):\s?(.*)$/) {
                push @{ $cur->{checks} }, { header => $1, eq => $2 };
            } else {
                die "$name: cannot parse request line: $line\n";
            }
            next;
        }

        $line =~ s/\s+$//;
        $cur = undef;

        if ($line =~ /^keepalive\s*\{$/) {
            die "$name: nested keepalive\n" if $group;
            $group = { type => 'keepalive', requests => [] };
            push @steps, $group;
        } elsif ($line eq '}') {
            die "$name: } without keepalive {\n" unless $group;
            $group = undef;
        } elsif ($line =~ /^sleep\s+([\d.]+)$/) {
            die "$name: sleep inside keepalive\n" if $group;
            push @steps, { type => 'sleep', seconds => $1 };
        } elsif ($line =~ /^perl\s*:\s*(.+)$/) {
            die "$name: perl inside keepalive\n" if $group;
            push @steps, { type => 'perl', code => "$1\n", n => ++$n };
        } elsif ($line =~ /^perl\s*\{$/) {
            die "$name: perl inside keepalive\n" if $group;
            $perl = { type => 'perl', code => '', n => ++$n };
            push @steps, $perl;
        } elsif ($line =~ m{^parallel\s+(\d+)\s+(?:([A-Z]+)\s+)?(/\S*)\s*=>\s*(.+)$})
        {
            die "$name: parallel inside keepalive\n" if $group;
            my ($count, $method, $uri, $spec) = ($1, $2 // 'GET', $3, $4);
            my %want;
            for my $part (split /\s*,\s*/, $spec) {
                $part =~ /^(\d{3})\s+x(\d+)$/
                    or die "$name: cannot parse parallel counts: $spec\n";
                $want{$1} = $2;
            }
            $cur = {
                type   => 'parallel',
                n      => ++$n,
                count  => $count,
                method => $method,
                uri    => $uri,
                want   => \%want,
                send   => [],
                checks => [],
            };
            push @steps, $cur;
        } elsif ($line =~ m{^(?:([A-Z]+)\s+)?(/\S*)(?:\s+x(\d+))?\s*=>\s*(\d{3})(?:\s+poll\s+([\d.]+))?$})
        {
            $cur = {
                type   => 'request',
                n      => ++$n,
                method => $1 // 'GET',
                uri    => $2,
                repeat => $3 // 1,
                status => $4,
                poll   => $5,
                send   => [],
                checks => [],
            };
            if ($group) {
                die "$name: poll inside keepalive\n" if $cur->{poll};
                push @{ $group->{requests} }, $cur;
            } else {
                push @steps, $cur;
            }
        } else {
            die "$name: cannot parse request line: $line\n";
        }
    }
    die "$name: keepalive { not closed\n" if $group;
    die "$name: perl { not closed by a line \"}\"\n" if $perl;
    for my $step (grep { $_->{type} eq 'parallel' } @steps) {
        die "$name: parallel request $step->{n}: only \"> Name: value\" "
            . "lines may follow\n" if @{ $step->{checks} };
    }
    return @steps;
}

sub short {
    my ($s) = @_;
    return length($s) > 60 ? substr($s, 0, 40) . '...(' . length($s) . ' bytes)'
                           : $s;
}

sub run_requests {
    my ($name, $env, $text) = @_;
    my @steps = eval { parse_requests($name, $text) };
    if ($@) {
        fail("$name: requests section parses");
        diag($@);
        return;
    }

    for my $step (@steps) {
        if ($step->{type} eq 'sleep') {
            sleep $step->{seconds};
        } elsif ($step->{type} eq 'perl') {
            run_perl_step($name, $env, $step);
        } elsif ($step->{type} eq 'parallel') {
            run_parallel($name, $env, $step);
        } elsif ($step->{type} eq 'request') {
            for my $i (1 .. $step->{repeat}) {
                my $label = label($name, $step, $i);
                my $res;
                wait_until($step->{poll} // 0, sub {
                    $res = one_request($env, $step);
                    return !$step->{poll} || response_matches($step, $res);
                }, 0.1);
                check_response($label, $step, $res);
                record($env, $res);
            }
        } else {    # keepalive: every request on one connection
            my $sock = connect_to($env);
            my $first = $step->{requests}[0];
            unless ($sock) {
                fail(label($name, $first, 1) . ': connect');
                next;
            }
            my $broken;
            for my $req (@{ $step->{requests} }) {
                for my $i (1 .. $req->{repeat}) {
                    my $label = label($name, $req, $i) . ' (keepalive)';
                    if ($broken) {
                        fail("$label: connection still open");
                        diag($broken);
                        next;
                    }
                    my $t0 = time;
                    my $res = http_exchange($sock, $req, 1);
                    $res->{elapsed} = time - $t0;
                    check_response($label, $req, $res);
                    record($env, $res);
                    $broken = $res->{error} if $res->{error};
                    $broken = 'server closed the connection'
                        if !$broken && $res->{closed};
                }
            }
            close $sock;
        }
    }
}

# Whether a response passes every check of a request (no test emitted).
sub response_matches {
    my ($req, $res) = @_;
    return 0 unless defined $res->{status} && !$res->{error};
    return 0 unless $res->{status} eq $req->{status};
    for my $c (@{ $req->{checks} }) {
        if ($c->{time_lt}) {
            return 0 unless $res->{elapsed} < $c->{time_lt};
            next;
        }
        if ($c->{body}) {
            (my $body = $res->{body}) =~ s/\n\z//;
            return 0 unless defined $c->{re} ? $body =~ $c->{re}
                                             : $body eq $c->{eq};
            next;
        }
        my $vals = $res->{headers}{ lc $c->{header} };
        if ($c->{absent}) {
            return 0 if $vals;
            next;
        }
        return 0 unless $vals && @$vals == 1;
        return 0 unless defined $c->{re} ? $vals->[0] =~ $c->{re}
                                         : $vals->[0] eq $c->{eq};
    }
    return 1;
}

# N connections opened, N requests written, then N responses read: the
# workers decide them concurrently. Checks how many got each status.
sub run_parallel {
    my ($name, $env, $step) = @_;
    my $label = "$name: request $step->{n} ($step->{count} x $step->{method} "
              . short($step->{uri}) . ' in parallel)';

    my (%got, @errors);
    for my $res (exchange_parallel($env, $step->{count}, $step)) {
        if (defined $res->{status}) {
            $got{ $res->{status} }++;
            record($env, $res);
        } else {
            push @errors, $res->{error} // 'no response';
        }
    }

    is($step->{count} - @errors, $step->{count},
       "$label: $step->{count} responses")
        or diag(join "\n", @errors);
    my $fmt = sub {
        my ($h) = @_;
        join ', ', map { "$_ x$h->{$_}" } sort keys %$h;
    };
    is($fmt->(\%got), $fmt->($step->{want}),
       "$label: statuses " . $fmt->($step->{want}));
}

# Every value each response header took, for --- distinct.
sub record {
    my ($env, $res) = @_;
    for my $k (keys %{ $res->{headers} }) {
        $env->{seen}{$k}{$_}++ for @{ $res->{headers}{$k} };
    }
}

sub label {
    my ($name, $req, $i) = @_;
    my $l = "$name: request $req->{n} ($req->{method} " . short($req->{uri});
    $l .= " [$i/$req->{repeat}]" if $req->{repeat} > 1;
    return "$l)";
}

sub check_response {
    my ($label, $req, $res) = @_;
    my $builder = Test::More->builder;
    $builder->todo_start($req->{todo}) if defined $req->{todo};
    check_response_inner($label, $req, $res);
    $builder->todo_end if defined $req->{todo};
}

sub check_response_inner {
    my ($label, $req, $res) = @_;

    if ($res->{error} && !defined $res->{status}) {
        fail("$label: response");
        diag($res->{error});
        return;
    }

    is($res->{status}, $req->{status}, "$label: status $req->{status}")
        or diag(dump_response($res));

    if ($res->{error}) {
        fail("$label: complete response");
        diag($res->{error});
    }

    for my $c (@{ $req->{checks} }) {
        if ($c->{time_lt}) {
            cmp_ok($res->{elapsed}, '<', $c->{time_lt},
                   "$label: answered in less than $c->{time_lt} s");
            next;
        }
        if ($c->{body}) {
            (my $body = $res->{body}) =~ s/\n\z//;
            if (defined $c->{re}) {
                like($body, $c->{re}, "$label: body =~ /$c->{re}/");
            } else {
                is($body, $c->{eq}, "$label: body");
            }
            next;
        }

        my $vals = $res->{headers}{ lc $c->{header} };
        my $name = $c->{header};

        if ($c->{absent}) {
            ok(!$vals, "$label: no $name header")
                or diag("$name: " . join(' | ', @$vals));
            next;
        }

        unless ($vals) {
            fail("$label: $name header present");
            diag(dump_response($res));
            next;
        }
        if (@$vals > 1) {
            fail("$label: $name header once");
            diag("$name sent " . @$vals . ' times: ' . join(' | ', @$vals));
            next;
        }
        if (defined $c->{re}) {
            like($vals->[0], $c->{re}, "$label: $name =~ /$c->{re}/");
        } else {
            is($vals->[0], $c->{eq}, "$label: $name: " . short($c->{eq}));
        }
    }
}

# ---------------------------------------------------------------------------
# Perl steps (see PERL STEPS)

sub run_perl_step {
    my ($name, $env, $step) = @_;
    my $label = "$name: perl step $step->{n}";
    (my $where = $label) =~ s/"/'/g;
    my $src = "package ThrottleTest::Step;\n"
            . "use strict; use warnings; use Test::More;\n"
            . "use Time::HiRes qw(time sleep);\n"
            . "our \$TODO;\n"
            . "sub {\n"
            . "my (\$name, \$nginx, \$stash) = \@_;\n"
            . "my \@redis = \@{ \$nginx->{redis} || [] };\n"
            . "my (\$redis, \$redis2) = \@redis;\n"
            . "our \%stash; local *stash = \$stash;\n"
            . "#line 1 \"$where\"\n"
            . $step->{code}
            . "\n;}\n";
    my $code = eval $src;
    unless ($code) {
        fail("$label compiles");
        diag($@);
        return;
    }
    local $ThrottleTest::Step::CURRENT = $env;
    $env->{stash} ||= {};
    unless (eval { $code->($name, $env, $env->{stash}); 1 }) {
        fail("$label runs");
        diag($@);
    }
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

package ThrottleTest::Step;

use Time::HiRes qw(time sleep);
use Processes qw(wait_until);

our $CURRENT;    # the block's $env while a step runs

sub request { ThrottleTest::http_request($CURRENT, @_) }

sub parallel_requests { ThrottleTest::http_parallel($CURRENT, @_) }

sub header {
    my ($res, $name) = @_;
    my $v = $res->{headers}{ lc $name };
    return $v ? $v->[0] : undef;
}

sub error_log { ThrottleTest::read_file($CURRENT->{log}) }

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

sub reload {
    my ($ok, $text) = ThrottleTest::reload_nginx($CURRENT, $CURRENT->{master});
    Test::More::diag("reload:\n$text") unless $ok;
    return $ok;
}

1;

