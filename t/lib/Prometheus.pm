# SPDX-License-Identifier: BSD-2-Clause
package Prometheus;

# The Prometheus side of the throttle_metrics tests: the text format read
# into samples, promtool's verdict on it, and a real Prometheus server
# (Debian's prometheus package) that scrapes an nginx and answers queries.

=head1 NAME

Prometheus - read /metrics, check it with promtool, scrape it with a real
Prometheus server

=head1 SYNOPSIS

    use Prometheus;

    my $samples = Prometheus::parse($text);
        # { 'nginx_throttle_requests_total{zone="a",result="passed"}' => 16,
        #   ... }: every sample line, as written, to its value
    my ($rc, $out) = Prometheus::promtool_check($text);
        # promtool check metrics on the text: 0 and '' when it has nothing
        # to say
    ($rc, $out) = Prometheus::promtool_check_rules($file);

    my $p = Prometheus->start(target => "127.0.0.1:$port",
                              metrics_path => '/metrics',
                              rules => 'docs/prometheus-rules.yml');
    my $series = $p->query('nginx_throttle_requests_total');
        # [ { metric => { __name__, zone, result, job, instance },
        #     value => [time, "16"] }, ... ]
    my $targets = $p->targets;  # [ { labels, health, lastError, ... } ]
    my $rules = $p->rules;      # [ { name, health, lastError, state... } ]
    my $alerts = $p->alerts;    # [ { labels => { alertname, ... }, state } ]
    $p->wait_for_scrapes(1);   # until it has scraped the target once
    $p->stop;                  # also done when $p goes, and at END

=head1 THE SERVER

C<prometheus> (C<TEST_PROMETHEUS>, default F</usr/bin/prometheus>) runs in
the foreground as a child of the test, on 127.0.0.1 and a free port, with
its own temporary directory (configuration, TSDB, log) and one scrape job
C<nginx> for the target, every second; C<rules> names a rule file, which
it evaluates every second. C<start> returns once
C</-/ready> answers 200; every wait is bounded by C<TEST_THROTTLE_TIMEOUT>
(default 5 s), but the first scrape's, which Prometheus 2.42 starts some
5 s after it is ready (its discovery reloads every 5 s): twice that. C<stop> sends TERM and waits (KILL after the timeout); the
object's destructor and Processes' END block stop a server a test did not.

=cut

use strict;
use warnings;

use File::Temp;
use HTTP::Tiny;
use JSON::PP;
use Processes qw($TIMEOUT wait_until free_port read_file fork_child
                 kill_wait run_cmd);

our $PROMETHEUS = $ENV{TEST_PROMETHEUS} || '/usr/bin/prometheus';
our $PROMTOOL   = $ENV{TEST_PROMTOOL}   || '/usr/bin/promtool';

sub available { return -x $PROMETHEUS && -x $PROMTOOL }

# ---------------------------------------------------------------------------
# The text format

# Every sample line (comments and blank lines left out): the series as
# written, up to the space before its value, => the value. Dies on a line
# that is not "series value".
sub parse {
    my ($text) = @_;
    my %samples;
    for my $line (split /\n/, $text) {
        next if $line =~ /^(#|\s*$)/;
        my ($series, $value) = $line =~ /^(\S+) (\S+)$/
            or die "not a sample line: $line\n";
        die "a series twice: $series\n" if exists $samples{$series};
        $samples{$series} = $value;
    }
    return \%samples;
}

# promtool check metrics on $text: (exit code, what it printed).
sub promtool_check {
    my ($text) = @_;
    my $in = File::Temp->new(TMPDIR => 1);
    print $in $text;
    close $in;
    return run_cmd(['sh', '-c', "exec $PROMTOOL check metrics < $in"]);
}

# promtool check rules on a rule file: (exit code, what it printed).
sub promtool_check_rules {
    my ($file) = @_;
    return run_cmd([$PROMTOOL, 'check', 'rules', $file]);
}

# ---------------------------------------------------------------------------
# The server

sub start {
    my ($class, %o) = @_;
    my $dir = File::Temp->newdir('prometheus-test-XXXXXX', TMPDIR => 1);
    my $self = bless { dir => $dir, port => free_port() }, $class;

    my $rule_files = $o{rules} ? "rule_files: ['$o{rules}']" : '';
    open my $fh, '>', "$dir/prometheus.yml" or die "$dir/prometheus.yml: $!";
    print $fh <<"YAML";
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
$rule_files
scrape_configs:
  - job_name: nginx
    metrics_path: $o{metrics_path}
    static_configs:
      - targets: ['$o{target}']
YAML
    close $fh;

    my @cmd = ($PROMETHEUS, "--config.file=$dir/prometheus.yml",
               "--storage.tsdb.path=$dir/data",
               "--web.listen-address=127.0.0.1:$self->{port}",
               '--log.level=warn');
    $self->{pid} = fork_child(sub {
        open STDOUT, '>', "$dir/prometheus.log";
        open STDERR, '>&', \*STDOUT;
        exec @cmd;
    });

    my $http = HTTP::Tiny->new(timeout => $TIMEOUT);
    unless (wait_until($TIMEOUT, sub {
        $http->get($self->url . '/-/ready')->{status} == 200
    }, 0.05)) {
        my $log = $self->log;
        $self->stop;
        die "prometheus not ready after ${TIMEOUT}s:\n$log";
    }
    return $self;
}

sub url { "http://127.0.0.1:$_[0]{port}" }

sub log { read_file("$_[0]{dir}/prometheus.log") }

# The data of an API call (GET /api/v1/$path); dies when it fails.
sub api {
    my ($self, $path) = @_;
    my $res = HTTP::Tiny->new(timeout => $TIMEOUT)->get(
        $self->url . "/api/v1/$path");
    die "$path: HTTP $res->{status}: $res->{content}\n"
        unless $res->{success};
    my $body = decode_json($res->{content});
    die "$path: $body->{status}: " . ($body->{error} // '') . "\n"
        unless $body->{status} eq 'success';
    return $body->{data};
}

# The result of an instant query: a list of series, each { metric =>
# { label => value }, value => [time, "value"] }.
sub query {
    my ($self, $expr) = @_;
    return $self->api('query?query=' . _escape($expr))->{result};
}

# The active targets: each { labels, health ("up"), lastError, ... }.
sub targets {
    my ($self) = @_;
    return $self->api('targets')->{activeTargets};
}

# The rules of every group: each { name, health ("ok"), lastError,
# lastEvaluation, ... }.
sub rules {
    my ($self) = @_;
    return [map { @{ $_->{rules} } } @{ $self->api('rules')->{groups} }];
}

# The alerts pending or firing: each { labels, state, value, ... }.
sub alerts {
    my ($self) = @_;
    return $self->api('alerts')->{alerts};
}

# Waits until the server has scraped its target $n times (the samples of
# "up" over the last minute); true if it did within twice $TIMEOUT.
sub wait_for_scrapes {
    my ($self, $n) = @_;
    return wait_until($TIMEOUT * 2, sub {
        my $r = $self->query('count_over_time(up{job="nginx"}[1m])');
        return @$r && $r->[0]{value}[1] >= $n;
    }, 0.2);
}

sub stop {
    my ($self) = @_;
    kill_wait(delete $self->{pid}, 'TERM') if $self->{pid};
}

sub DESTROY { $_[0]->stop }

sub _escape {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf '%%%02X', ord $1/ge;
    return $s;
}

1;
