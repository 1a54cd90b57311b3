# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Requests;

# The --- requests (and --- requests_after_reload) section of a block: its
# syntax, parsed into steps, and the steps run against the block's nginx,
# one test per status and per check. Perl steps are compiled here into
# package ThrottleTest::Step (see ThrottleTest/Step.pm).

=head1 REQUESTS

The requests to send, in order, and what each must get back:

    # comment
    [METHOD] /uri [xN] => STATUS       one request (GET by default);
                                       xN sends it N times, each checked
      > Name: value                    a request header to send
      >> text                          the request body (with its
                                       Content-Length); several such
                                       lines are joined by "\n"
      Name: value                      response header, exact value; a
                                       number written {N-} counts down
                                       from N: it may be less by the
                                       whole seconds since the block's
                                       nginx started (t= or Retry-After
                                       of a key charged in the block)
      Name ~ regex                     response header matching a regex
      no Name                          response header absent
      body: text                       body, exact (one final \n ignored)
      body ~ regex                     body matching a regex
      todo: reason                     this request's checks are TODO
      time < SECONDS                   answered (connect to last byte) in
                                       less than SECONDS
    keepalive {                        the requests up to "}" go on ONE
      ...                              connection (Connection: keep-alive);
    }                                  otherwise each has its own, and
                                       the next request waits until
                                       nginx has closed it (the log
                                       phase done)
    sleep SECONDS                      pause (keep it short)
    perl: CODE                         Perl run between requests (see
                                       ThrottleTest::Step)
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

=cut

use strict;
use warnings;

use Exporter 'import';
use Test::More;
use POSIX ();
use Time::HiRes qw(sleep time);
use Processes qw(wait_until);
use ThrottleTest::Http qw(connect_to http_exchange one_request
                          exchange_parallel dump_response);
use ThrottleTest::Step ();

our @EXPORT_OK = qw(run_requests);

# Parses the --- requests DSL into a list of steps:
#   { type => 'request', ... } | { type => 'keepalive', requests => [...] }
#   | { type => 'parallel', ... } | { type => 'sleep', seconds => N }
#   | { type => 'perl', code => TEXT }
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
            if ($line =~ /^>> ?(.*)$/) {
                $cur->{body} = defined $cur->{body} ? "$cur->{body}\n$1" : $1;
            } elsif ($line =~ /^>\s*([^:\s]+):\s?(.*)$/) {
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
                my ($header, $value) = ($1, $2);
                push @{ $cur->{checks} }, { header => $header, eq => $value,
                                            countdown => scalar($value =~ /\{\d+-\}/) };
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

# Parses the section and runs its steps; a section that does not parse is
# one failed test.
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
                    return !$step->{poll} || response_matches($env, $step, $res);
                }, 0.1);
                check_response($env, $label, $step, $res);
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
                    check_response($env, $label, $req, $res);
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

# ---------------------------------------------------------------------------
# Checks

# What a request asks of its response, in order, as [kind, got, want, test
# name, diagnostic if it fails]: kind 'is', 'like', '<' (got < want) or
# 'ok' (got is true). check_response makes them tests; response_matches
# (for poll) only asks whether they all hold.
sub expectations {
    my ($env, $label, $req, $res) = @_;

    if ($res->{error} && !defined $res->{status}) {
        return ['ok', 0, undef, "$label: response", $res->{error}];
    }

    my @e = ['is', $res->{status}, $req->{status},
             "$label: status $req->{status}", dump_response($res)];
    push @e, ['ok', 0, undef, "$label: complete response", $res->{error}]
        if $res->{error};

    for my $c (@{ $req->{checks} }) {
        if ($c->{time_lt}) {
            push @e, ['<', $res->{elapsed}, $c->{time_lt},
                      "$label: answered in less than $c->{time_lt} s"];
            next;
        }
        if ($c->{body}) {
            (my $body = $res->{body}) =~ s/\n\z//;
            push @e, defined $c->{re}
                ? ['like', $body, $c->{re}, "$label: body =~ /$c->{re}/"]
                : ['is', $body, $c->{eq}, "$label: body"];
            next;
        }

        my $vals = $res->{headers}{ lc $c->{header} };
        my $name = $c->{header};

        if ($c->{absent}) {
            push @e, ['ok', !$vals, undef, "$label: no $name header",
                      $vals && "$name: " . join(' | ', @$vals)];
        } elsif (!$vals) {
            push @e, ['ok', 0, undef, "$label: $name header present",
                      dump_response($res)];
        } elsif (@$vals > 1) {
            push @e, ['ok', 0, undef, "$label: $name header once",
                      "$name sent " . @$vals . ' times: '
                      . join(' | ', @$vals)];
        } elsif (defined $c->{re}) {
            push @e, ['like', $vals->[0], $c->{re},
                      "$label: $name =~ /$c->{re}/"];
        } elsif ($c->{countdown}) {
            my ($ok, $range) = countdown($c->{eq}, $vals->[0], $env->{started});
            push @e, ['ok', $ok, undef, "$label: $name: " . short($c->{eq}),
                      "$name: $vals->[0] (expected $range)"];
        } else {
            push @e, ['is', $vals->[0], $c->{eq},
                      "$label: $name: " . short($c->{eq})];
        }
    }
    return @e;
}

# One test per expectation; TODO when the request has a todo line.
sub check_response {
    my ($env, $label, $req, $res) = @_;
    my $builder = Test::More->builder;
    $builder->todo_start($req->{todo}) if defined $req->{todo};
    for my $e (expectations($env, $label, $req, $res)) {
        my ($kind, $got, $want, $name, $diag) = @$e;
        my $ok = $kind eq 'is'   ? is($got, $want, $name)
               : $kind eq 'like' ? like($got, $want, $name)
               : $kind eq '<'    ? cmp_ok($got, '<', $want, $name)
               :                   ok($got, $name);
        diag($diag) if !$ok && defined $diag;
    }
    $builder->todo_end if defined $req->{todo};
}

# Whether a response passes every check of a request (no test emitted).
sub response_matches {
    my ($env, $req, $res) = @_;
    for my $e (expectations($env, '', $req, $res)) {
        my ($kind, $got, $want) = @$e;
        return 0 unless $kind eq 'is'   ? defined $got && $got eq $want
                      : $kind eq 'like' ? defined $got && $got =~ $want
                      : $kind eq '<'    ? $got < $want
                      :                   $got;
    }
    return 1;
}

# Whether $got is $template with a number from N less the whole seconds
# since $since up to N for each {N-}; and the template with those ranges.
sub countdown {
    my ($template, $got, $since) = @_;
    my $secs = POSIX::ceil(time - $since);
    my @parts = split /\{(\d+)-\}/, $template, -1;
    my ($re, @from) = ('');
    while (@parts) {
        $re .= quotemeta shift @parts;
        next unless @parts;
        push @from, shift @parts;
        $re .= '(\d+)';
    }
    my @v = $got =~ /^$re$/;
    my $ok = @v == @from
        && !grep { $v[$_] > $from[$_] || $v[$_] < $from[$_] - $secs } 0 .. $#v;
    (my $range = $template) =~ s/\{(\d+)-\}/($1 - $secs) . "..$1"/ge;
    return ($ok, $range);
}

# ---------------------------------------------------------------------------
# Perl steps: the code runs in package ThrottleTest::Step, which documents
# what it sees.

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
            . "my (\$cluster) = grep { \$_->isa('RedisCluster') } \@redis;\n"
            . "my (\$sentinel) = grep { \$_->isa('RedisSentinel') } \@redis;\n"
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

1;
