# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Blocks;

# The blocks of a test file: the __DATA__ text read by Test::Base's
# data-block parser, then each block run in turn: its Redis servers and
# nginx started, the requests sent, a reload, the error.log checked,
# everything stopped. The POD below lists the sections a block may have,
# and what the blocks of a file may share (defaults, fragments).

=head1 SECTIONS

Parsed by Test::Base: C<=== name> starts a block, C<--- section> a
section; C<--- section: value> is a one-line section. Test::Base filters
apply, e.g. C<--- requests eval> evaluates the section as Perl and uses
the result (handy for 64 KiB header values). C<--- ONLY> and C<--- SKIP>
work as in Test::Base.

=over

=item main_config, http_config, config

Text placed at the top level, inside C<http{}>, inside C<server{}>. A
file may give defaults for them, and C<@NAME> fragments they include
(SHARED BY THE BLOCKS OF A FILE, below).

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
error.log has no "exited on signal", [alert] or [crit] (but for the
death of a worker a step killed with C<kill_worker()>).

=item must_die

nginx must not start: C<nginx -t> must fail and its output must contain
each pattern (same syntax as error_log).

=item distinct

C<Name E<gt>= N> per line: across all responses of the block, header Name
took at least N distinct values (e.g. C<X-Pid E<gt>= 2> with
C<add_header X-Pid $pid always;>: both workers served). Such a block's
nginx listens with C<reuseport>: the kernel then spreads connections over
the workers by their ports, where without it whichever worker waits may
take them all (it happens: 30 requests one after another, all on one
worker, on a busy machine).

=item default_timeout

A C<throttle_redis> line with no C<timeout=> gets C<timeout=1s> in a
block's nginx, unless the block has this section (empty): the module's
default, 50 ms, is more than a reply takes on an idle machine, but not on
one whose CPUs are busy, where a request would then be answered by
C<throttle_on_error> instead of Redis. A block about timeouts sets its
own, or tests the default with this section.

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

Redis servers (real, TLS, fake or a closed port) to start before nginx
and stop after it, one per line; their ports replace
C<$TEST_REDIS_PORT>, C<$TEST_REDIS_PORT_2>... in the configuration
sections. The lines are in L<ThrottleTest::Redis>
(F<t/lib/ThrottleTest/Redis.pm>).

=item todo

C<--- todo: reason>: every test of the block is TODO (a known module
bug; the suite stays green and reports it); in a must_die block, only the
message checks. A C<todo: reason> line under a request makes only that
request's checks TODO.

=back

=head1 SHARED BY THE BLOCKS OF A FILE

What comes after C<__DATA__> and before the first C<=== > line is the
file's preamble: free text (say what is shared, and why), then sections
in the same C<--- name> syntax, shared by every block of the file. Two
kinds:

=over

=item C<--- main_config>, C<--- http_config>, C<--- config>

A default: a block that has no such section of its own gets this one
(and its C<reload_*> sections fall back on it as on a section of the
block). A block with the section, even empty, keeps its own. A block
whose expected values depend on a zone's rate, burst or algorithm should
show that zone line itself rather than take it from here.

=item C<--- @NAME>

A fragment (NAME: letters, digits, C<_> and C<->): a line that is only
C<@NAME> (maybe indented) in any configuration section of a block
(C<main_config>, C<http_config>, C<config> and their C<reload_>
counterparts), or in a default above, is replaced by the fragment's
lines, indented as C<@NAME> was (no nginx directive is a lone C<@NAME>:
named locations follow C<location> or C<try_files>).

=back

For example:

    __DATA__

    Every block's Redis backend is "main"; a block with no server{}
    configuration of its own limits /a.txt by zone z.

    --- @redis_main
    throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;

    --- config
    location = /a.txt {
        throttle zone=z;
    }

    === TEST 1: burst=0: one request, then 429
    --- redis
    redis
    --- http_config
    @redis_main
    throttle_zone $http_x_key zone=z:1m rate=1r/m burst=0 redis=main;
    --- requests
    ...

The preamble's sections take no Test::Base filters (C<eval> and the
like): they are text. An unknown section there, or a C<@NAME> with no
fragment, stops the file at once.

=cut

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path);
use Test::Base ();    # only its data-block parser; assertions: Test::More
use Test::More;
use Processes qw(read_file children_of);
use ThrottleTest::Nginx qw(check_binaries setup_prefix write_config
                           nginx_cmd start_nginx stop_nginx reload_nginx);
use ThrottleTest::Redis qw(start_redis stop_redis);
use ThrottleTest::Requests qw(run_requests);

our @EXPORT_OK = qw(run_blocks);

# Runs every block of the test file, then done_testing.
sub run_blocks {
    check_binaries();

    my @blocks = parse_blocks();
    BAIL_OUT("no test blocks found in $0") unless @blocks;

    for my $block (@blocks) {
        run_block($block);
    }

    done_testing();
}

# The configuration sections: fragments expand in them.
my %CONFIG = map { $_ => 1 } qw(main_config http_config config
    reload_main_config reload_http_config reload_config);

# The sections a preamble may give a default for.
my %DEFAULTS = map { $_ => 1 } qw(main_config http_config config);

sub parse_blocks {
    my $spec = do {
        no warnings 'once';
        local $/;
        my $fh = \*main::DATA;
        <$fh>;
    };
    return () unless defined $spec;

    my ($defaults, $fragments) = parse_preamble($spec);

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
        for my $name (keys %$defaults) {
            $sec{$name} = $defaults->{$name} unless exists $sec{$name};
        }
        for my $name (grep { $CONFIG{$_} } keys %sec) {
            $sec{$name} = expand($sec{$name}, $fragments,
                                 "${\ $b->name}, --- $name");
        }
        push @blocks, { name => $b->name, sec => \%sec };
    }
    return @blocks;
}

# The preamble of the file's data, before its first block (SHARED BY THE
# BLOCKS OF A FILE): ({ section => default text }, { NAME => fragment }).
sub parse_preamble {
    my ($spec) = @_;
    my ($preamble) = $spec =~ /\A(.*?)(?=^===[ \t]|\z)/ms;
    my @parts = split /^---[ \t]+(\S+)[ \t]*\n/m, $preamble;
    shift @parts;    # the free text before the first section
    my (%defaults, %fragments);
    while (my ($name, $text) = splice @parts, 0, 2) {
        $text //= '';
        $text =~ s/\A([ \t]*\n)+//;    # as Test::Base's trim filter
        $text =~ s/(?<=\n)\s*\z//;
        if ($name =~ /^\@([\w-]+)$/) {
            $fragments{$1} = $text;
        } elsif ($DEFAULTS{$name}) {
            $defaults{$name} = $text;
        } else {
            BAIL_OUT("$0: the preamble of __DATA__ has a section \"$name\": "
                     . 'only main_config, http_config, config and @NAME');
        }
    }
    # a default may use fragments too
    $defaults{$_} = expand($defaults{$_}, \%fragments, "preamble, --- $_")
        for keys %defaults;
    return (\%defaults, \%fragments);
}

# $text with each line "@NAME" replaced by fragment NAME, indented as the
# line was.
sub expand {
    my ($text, $fragments, $where) = @_;
    $text =~ s{^([ \t]*)\@([\w-]+)[ \t]*\n?}{
        my ($indent, $name) = ($1, $2);
        defined $fragments->{$name}
            or BAIL_OUT("$0: $where: no fragment \@$name in the preamble");
        join '', map { /\S/ ? "$indent$_" : $_ }
            split /^/, $fragments->{$name};
    }gme;
    return $text;
}

my %KNOWN = map { $_ => 1 } qw(
    main_config http_config config user_files requests
    must_die error_log no_error_log todo distinct default_timeout
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
    $env->{reuseport} = defined $sec->{distinct};

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
    patterns_ok($sec->{must_die}, $out, "$name: nginx -t output has",
                "nginx -t output:\n$out");
    $builder->todo_end if defined $sec->{todo};
}

sub run_server_block {
    my ($name, $env, $sec) = @_;
    my $failures_before = failures();

    $env->{redis_timeout} = defined $sec->{default_timeout} ? undef : '1s';
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
            patterns_ok($sec->{reload_fails}, $text,
                        "$name: reload refusal says",
                        "log since the reload:\n$text");
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

    # the workers a step killed (kill_worker) did not crash
    my $crashes = $log;
    $crashes =~ s/^.*\bworker process $_ exited on signal 9\b.*\n//mg
        for @{ $env->{killed} || [] };
    unlike($crashes, qr/exited on signal|\[alert\]|\[crit\]/,
           "$name: no crash, alert or crit in error.log");

    patterns_ok($sec->{error_log}, $log, "$name: error.log has",
                tail_log($log));
    patterns_ok($sec->{no_error_log}, $log, "$name: error.log has no",
                tail_log($log), 'absent');
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

# One test per pattern line of $spec: "$title PATTERN", passing when $text
# has the pattern (has it not, with $absent); $diag when it fails.
sub patterns_ok {
    my ($spec, $text, $title, $diag, $absent) = @_;
    for my $pat (pattern_lines($spec)) {
        my $has = pattern_match($pat, $text);
        ok($absent ? !$has : $has, "$title " . pattern_desc($pat))
            or diag($diag);
    }
}

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

1;
