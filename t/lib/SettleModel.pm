# SPDX-License-Identifier: BSD-2-Clause
package SettleModel;

# Models of a key of each algorithm under cost= reservations and settle=,
# written from docs/settle.md and docs/algorithms.md apart from the
# module's code, for a test that drives a real nginx with the wall clock:
# it cannot know the microsecond at which nginx decided or settled, only
# an interval around it. So each model keeps what the key may hold over
# those intervals, and says what a decision may be:
#
#     my $m = SettleModel->new($algorithm, rate_per_s => 10, burst => 4);
#     my $d = $m->decide($cost, $a, $b);
#         # the decision at some time in [$a, $b] (us): { pass => 1, 0 or
#         # undef (either), rem => [lowest, highest] remaining }
#     $m->commit($cost, $a, $b, $id);       # it passed at some time in [$a, $b]
#     $m->settle($delta, $a, $c, $id);      # its settle, at some time in
#                                           # [$a, $c], of request $id
#     $m->window_us, $m->limit
#
# A window algorithm's caller sees to it that a request's [$a, $c] lies
# in one aligned window (the window a refund falls in is then that of its
# reservation): window_of($t) says which. GCRA's clock is any one clock,
# the windows' the wall clock (nginx decides by CLOCK_MONOTONIC and
# CLOCK_REALTIME, Redis by TIME).

use strict;
use warnings;

use POSIX qw(floor);
use SlidingWindow ();

sub new {
    my ($class, $algorithm, %p) = @_;
    my $t = int(1_000_000 / $p{rate_per_s});
    my $self = bless { algorithm => $algorithm, t => $t, burst => $p{burst} },
                     $class;
    if ($algorithm eq 'gcra') {
        $self->{limit} = $p{burst} + 1;
        $self->{dvt} = $self->{limit} * $t;
        $self->{tat} = undef;             # [lo, hi], or undef: fresh
    } else {
        $self->{limit} = $p{rate_per_s} + $p{burst};
        $self->{w} = 1_000_000;
        $self->{counts} = [0, 0, 0];      # window start, previous, current
        $self->{log} = [];                # sliding_log: [lo, hi, id] each
    }
    return $self;
}

sub limit     { $_[0]{limit} }
sub window_us { $_[0]{w} }
sub window_of { my ($self, $t) = @_; $t - $t % $self->{w} }

# decide / commit / settle, per algorithm
sub decide { my $s = shift; my $f = "$s->{algorithm}_decide"; $s->$f(@_) }
sub commit { my $s = shift; my $f = "$s->{algorithm}_commit"; $s->$f(@_) }
sub settle { my $s = shift; my $f = "$s->{algorithm}_settle"; $s->$f(@_) }

sub max { $_[0] > $_[1] ? $_[0] : $_[1] }

# One decision for the extremes of what may be; pass undef if they differ.
sub either {
    my ($best, $worst) = @_;    # each [pass, remaining]
    my @rem = sort { $a <=> $b } $best->[1], $worst->[1];
    return { pass => $best->[0] == $worst->[0] ? $best->[0] : undef,
             rem => \@rem };
}

# --- gcra: the funnel's TAT, [lo, hi]; a request fits when the TAT,
# after its cost, is at most the tolerance (limit * T) ahead of now.

sub gcra_at {
    my ($self, $ahead, $cost) = @_;    # TAT - now, never below 0
    my ($t, $dvt) = @$self{qw(t dvt)};
    my $pass = $cost * $t <= $dvt && $ahead + $cost * $t <= $dvt ? 1 : 0;
    my $next = $dvt - $ahead - ($pass ? $cost * $t : 0);
    return [$pass, $next > 0 ? int($next / $t) : 0];
}

sub gcra_decide {
    my ($self, $cost, $a, $b) = @_;
    my ($lo, $hi) = $self->{tat} ? @{ $self->{tat} } : (0, 0);
    return either($self->gcra_at(max($lo - $b, 0), $cost),
                  $self->gcra_at(max($hi - $a, 0), $cost));
}

sub gcra_commit {
    my ($self, $cost, $a, $b) = @_;
    my ($lo, $hi) = $self->{tat} ? @{ $self->{tat} } : (0, 0);
    my $inc = $cost * $self->{t};
    $self->{tat} = [max($lo, $a) + $inc, max($hi, $b) + $inc];
}

# a charge from max(TAT, now), even beyond the tolerance; a refund moves
# the TAT back, never before now
sub gcra_settle {
    my ($self, $delta, $a, $c) = @_;
    my ($lo, $hi) = @{ $self->{tat} };
    my $span = $delta * $self->{t};
    $self->{tat} = $delta > 0
        ? [max($lo, $a) + $span, max($hi, $c) + $span]
        : [max($lo + $span, $a), max($hi + $span, $c)];
}

# --- fixed_window and sliding_window: counters of the aligned windows,
# [start, previous, current], exact (the caller keeps a request in one
# window). The counters as of the window starting at $start:
sub counts_at {
    my ($self, $start) = @_;
    my ($s, $prev, $cur) = @{ $self->{counts} };
    return ($prev, $cur) if $s == $start;
    return ($cur, 0) if $s == $start - $self->{w};
    return (0, 0);
}

sub fixed_window_decide {
    my ($self, $cost, $a) = @_;
    my (undef, $count) = $self->counts_at($self->window_of($a));
    my $l = $self->{limit};
    my $pass = $cost <= $l && $count + $cost <= $l ? 1 : 0;
    $count += $cost if $pass;
    my $rem = max($l - $count, 0);
    return { pass => $pass, rem => [$rem, $rem] };
}

sub counter_commit {
    my ($self, $cost, $a) = @_;
    my $start = $self->window_of($a);
    my ($prev, $cur) = $self->counts_at($start);
    $self->{counts} = [$start, $prev, $cur + $cost];
}

# A charge adds to now's counter; a refund takes from it (the
# reservation's window is now's), never below 0.
sub counter_settle {
    my ($self, $delta, $a) = @_;
    my $start = $self->window_of($a);
    my ($prev, $cur) = $self->counts_at($start);
    $prev = 0 if $self->{algorithm} eq 'fixed_window';
    $self->{counts} = [$start, $prev, max($cur + $delta, 0)];
}

*fixed_window_commit = \&counter_commit;
*fixed_window_settle = \&counter_settle;
*sliding_window_commit = \&counter_commit;
*sliding_window_settle = \&counter_settle;

# The weighted count falls as the window goes on: the decision at $a is
# the worst, at $b the best.
sub sliding_window_decide {
    my ($self, $cost, $a, $b) = @_;
    my @at = map {
        my $d = SlidingWindow::decide($self->{counts}, $_, $self->{w},
                                      $self->{limit}, $cost);
        [$d->{limited} ? 0 : 1, $d->{remaining}]
    } $b, $a;
    return either(@at);
}

# --- sliding_log: entries, each stamped at some time in [lo, hi], which
# count while they are less than a window old.

sub sliding_log_count {
    my ($self, $a, $b) = @_;
    my $w = $self->{w};
    my @log = @{ $self->{log} };
    my $surely = grep { $_->[0] > $b - $w } @log;
    my $maybe = grep { $_->[1] > $a - $w } @log;
    return ($surely, $maybe);
}

sub sliding_log_decide {
    my ($self, $cost, $a, $b) = @_;
    my ($surely, $maybe) = $self->sliding_log_count($a, $b);
    my $l = $self->{limit};
    my $at = sub {
        my ($count) = @_;
        my $pass = $cost <= $l && $count + $cost <= $l ? 1 : 0;
        return [$pass, $l - $count - ($pass ? $cost : 0)];
    };
    return either($at->($surely), $at->($maybe));
}

# Entries surely gone by $a are dropped; of the rest, the newest `limit`
# are kept (the oldest give way to a settle's debt; any that are gone
# already count for nothing anyway).
sub sliding_log_add {
    my ($self, $n, $lo, $hi, $id) = @_;
    my $w = $self->{w};
    my @log = grep { $_->[1] > $lo - $w } @{ $self->{log} };
    push @log, [$lo, $hi, $id] for 1 .. $n;
    splice @log, 0, @log - $self->{limit} if @log > $self->{limit};
    $self->{log} = \@log;
}

sub sliding_log_commit {
    my ($self, $cost, $a, $b, $id) = @_;
    $self->sliding_log_add($cost, $a, $b, $id);
}

# A charge logs entries at the settle's time; a refund removes up to
# -delta of the request's own entries (those gone already need no
# removing).
sub sliding_log_settle {
    my ($self, $delta, $a, $c, $id) = @_;
    if ($delta > 0) {
        my $n = $delta < $self->{limit} ? $delta : $self->{limit};
        return $self->sliding_log_add($n, $a, $c, "settle of $id");
    }
    my $left = -$delta;
    $self->{log} = [grep {
        !($_->[2] eq $id && $left > 0 && $left--)
    } @{ $self->{log} }];
}

# What the model holds, for a diagnostic.
sub describe {
    my ($self) = @_;
    return 'TAT ' . ($self->{tat} ? "[@{ $self->{tat} }]" : 'fresh')
        if $self->{algorithm} eq 'gcra';
    return 'log of ' . @{ $self->{log} } . ' entries: '
        . join(' ', map { "[$_->[0],$_->[1]]" } @{ $self->{log} })
        if $self->{algorithm} eq 'sliding_log';
    return "counts [@{ $self->{counts} }]";
}

1;
