#!/usr/bin/perl
# SPDX-License-Identifier: BSD-2-Clause
# Reads the sanitizer report files of make sanitize and decides:
#
#   check_reports.pl --ours TEXT... [--planted TEXT...] DIR...
#
# A frame is ours when its line contains one of the --ours texts (the
# module's and the core's sources, the module file, into which the core and
# hiredis are linked, the unit tests). A report with a frame of ours fails
# the run and is printed; so does text that is no report (a sanitizer's own
# error). A leak report is judged leak by leak: nginx keeps memory to its
# exit on purpose (pools, its connections), and those leaks, whose stacks
# are nginx's alone, are counted and left. Other reports without a frame of
# ours are counted and left too.
#
# With --planted TEXT (the planted module's source and file), the three
# planted reports must be there, each with a stack through the planted
# module: UBSan's NULL passed to memcpy, AddressSanitizer's
# heap-buffer-overflow and a leak.
# Exits 1 when the run fails.

use strict;
use warnings;

use File::Basename qw(basename);
use Getopt::Long;

my (@ours, @planted);
GetOptions('ours=s' => \@ours, 'planted=s' => \@planted)
    and @ours and @ARGV
    or die "usage: $0 --ours TEXT... [--planted TEXT...] DIR...\n";

my $START = qr/^==\d+==ERROR: (\w+Sanitizer: \S+.*)$|^\S.*: runtime error: (.*)$/;
my $FRAME = qr/^\s*#\d+ 0x[0-9a-f]+/;
my $NOISE = qr/^(?:=+|\w+Sanitizer:DEADLYSIGNAL|)$/;

my $failed = 0;
$failed += check_dir($_) for @ARGV;
exit($failed ? 1 : 0);

# Judges the reports of a directory, prints what fails and a summary;
# returns how many things failed.
sub check_dir {
    my ($dir) = @_;
    my @files = sort glob("$dir/*");
    my (@reports, @unrecognised);
    for my $file (@files) {
        my ($reports, $rest) = parse_file($file);
        push @reports, @$reports;
        push @unrecognised, "$file:\n$rest" if $rest ne '';
    }

    my $failed = @unrecognised;
    $failed += check_planted(\@reports) if @planted;

    my (@failing, %ignored);
    for my $r (grep { !$_->{planted} } @reports) {
        my @ours_parts = grep { is_ours($_) } @{ $r->{parts} };
        push @failing, { %$r, parts => \@ours_parts } if @ours_parts;
        $ignored{ ignore_reason($r, $_) }++
            for grep { !is_ours($_) } @{ $r->{parts} };
    }

    print_failing(\@failing);
    print "sanitize: not a report, in ", $_ for @unrecognised;
    print_summary(basename($dir), scalar @files, scalar @reports, \@failing,
                  \%ignored);
    return $failed + @failing;
}

# The reports of a file, and the text that belongs to none.
sub parse_file {
    my ($file) = @_;
    open my $fh, '<', $file or die "$file: $!\n";
    my (@reports, $rest, $r);
    $rest = '';
    while (my $line = <$fh>) {
        if ($line =~ $START) {
            $r = { file => $file, kind => $1 // "UndefinedBehaviorSanitizer: $2",
                   text => $line };
            push @reports, $r;
        } elsif ($r) {
            $r->{text} .= $line;
        } elsif ($line !~ $NOISE) {
            $rest .= $line;
        }
    }
    $_->{parts} = split_leaks($_) for @reports;
    return (\@reports, $rest);
}

# A leak report's leaks, each with its stack; any other report whole.
sub split_leaks {
    my ($r) = @_;
    return [ $r->{text} ] unless $r->{kind} =~ /^LeakSanitizer/;
    my @leaks = split /^(?=(?:Direct|Indirect) leak of )/m, $r->{text};
    shift @leaks;    # the header
    s/^SUMMARY:.*\z//ms for @leaks;
    return \@leaks;
}

sub is_ours {
    my ($text) = @_;
    return has_frame_of($text, \@ours);
}

# Whether a frame (or UBSan's place of the error) names one of @$texts.
sub has_frame_of {
    my ($text, $texts) = @_;
    for my $line (grep { /$FRAME/ || /runtime error:/ } split /\n/, $text) {
        return 1 if grep { index($line, $_) >= 0 } @$texts;
    }
    return 0;
}

# Why a part of a report without a frame of ours is left. A leak's stack
# that does not reach main was cut short: at the frames run.sh keeps
# (malloc_context_size), or in nginx's frames when walked by frame
# pointers. Kept that deep, every path the module allocates by shows its
# own frame (run.sh says why), so such a leak is nginx's.
sub ignore_reason {
    my ($r, $part) = @_;
    return "reports without a frame of ours: $r->{kind}"
        unless $r->{kind} =~ /^LeakSanitizer/;
    return $part =~ /\b_start\b|__libc_start_main/
        ? 'leaks whose whole stack is nginx\'s (memory it keeps to its exit)'
        : 'leaks whose kept frames are all nginx\'s (the stack cut short)';
}

# Marks the planted reports; returns how many of the three are missing.
sub check_planted {
    my ($reports) = @_;
    my @want = (
        [ 'UBSan: NULL passed to memcpy',
          qr/^UndefinedBehaviorSanitizer: null pointer passed as argument/ ],
        [ 'AddressSanitizer: heap-buffer-overflow',
          qr/^AddressSanitizer: heap-buffer-overflow/ ],
        [ 'LeakSanitizer: a leak', qr/^LeakSanitizer/ ],
    );
    my $missing = 0;
    for my $w (@want) {
        my ($name, $kind) = @$w;
        my ($r) = grep { $_->{kind} =~ $kind && planted_stack($_) } @$reports;
        if ($r) {
            $r->{planted} = 1;
            printf "sanitize: planted %s: arrived in %s\n", $name,
                basename($r->{file});
        } else {
            print "sanitize: planted $name: MISSING: reports are lost\n";
            $missing++;
        }
    }
    return $missing;
}

# Whether a part of the report has a stack (two frames or more) through
# the planted module.
sub planted_stack {
    my ($r) = @_;
    for my $part (@{ $r->{parts} }) {
        my @frames = grep { /$FRAME/ } split /\n/, $part;
        return 1 if @frames >= 2 && has_frame_of($part, \@planted);
    }
    return 0;
}

# Each distinct failing report once (the same check at the same place
# reports again at every pass), with how often it came.
sub print_failing {
    my ($failing) = @_;
    my (%seen, @order);
    for my $r (@$failing) {
        for my $part (@{ $r->{parts} }) {
            my ($where) = grep { is_ours($_) } split /\n/, $part;
            my $key = "$r->{kind}\n" . ($where =~ s/0x[0-9a-f]+//gr);
            push @order, $key unless $seen{$key};
            $seen{$key}{count}++;
            $seen{$key}{text} //= "$r->{file}:\n"
                . ($r->{kind} =~ /^Leak/ ? "$r->{kind}\n" : '') . $part;
        }
    }
    for my $key (@order) {
        print "\nsanitize: FAILS ($seen{$key}{count}x): $seen{$key}{text}";
    }
}

sub print_summary {
    my ($name, $nfiles, $nreports, $failing, $ignored) = @_;
    my $nleaks = map { $_->{kind} =~ /^Leak/ ? @{ $_->{parts} } : () }
        @$failing;
    print "sanitize: $name: $nfiles report files, $nreports reports\n";
    printf "sanitize: $name: %d with a frame of the module, the core or "
        . "hiredis (%d leaks)\n", scalar @$failing, $nleaks;
    printf "sanitize: $name: ignored: %d %s\n", $ignored->{$_}, $_
        for sort keys %$ignored;
}
