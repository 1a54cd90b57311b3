# SPDX-License-Identifier: BSD-2-Clause
# throttle_metrics read by Prometheus's own tools: promtool check metrics on
# the output of every family (local, strict and async zones, with a real
# Redis), and a real Prometheus server on loopback that scrapes the block's
# nginx every second and answers, through its HTTP API, the values nginx
# sent; it evaluates docs/prometheus-rules.yml on them, and the alert of a
# zone that rejects too much goes pending.

use strict;
use warnings;

use FindBin;
use Test::More;

use Prometheus;
use ThrottleTest;

require_redis_module();
BAIL_OUT('prometheus/promtool missing: apt-get install prometheus')
    unless Prometheus::available();

our $RULES = "$FindBin::Bin/../docs/prometheus-rules.yml";

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# The families of a text, in order, each once: "# TYPE" lines, then the
# names of the samples; dies when a family's samples are not all under its
# own TYPE line.
# A sample's name belongs to the family: the same, or a histogram's
# _bucket, _sum and _count of it.
sub in_family {
    my ($sample, $family) = @_;
    return $sample eq $family
        || ($sample =~ /^(.+)_(?:bucket|sum|count)$/ && $1 eq $family);
}

sub families_of {
    my ($text) = @_;
    my (@families, %seen, $current);
    for my $line (split /\n/, $text) {
        if ($line =~ /^# TYPE (\S+) /) {
            die "$1 twice\n" if $seen{$1}++;
            push @families, $current = $1;
        } elsif ($line =~ /^([a-z_]+)\{/
                 && !in_family($1, $current // '')) {
            die "$1 sampled under the TYPE of " . ($current // 'none') . "\n";
        }
    }
    return @families;
}

run_blocks();

__DATA__

=== TEST 1: promtool check metrics finds nothing to say about every family, for local, strict and async zones
--- redis
redis
--- http_config
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $http_x_key zone=local:1m rate=1r/m burst=1;
throttle_zone $http_x_key zone=strict:1m rate=1r/m burst=1 redis=main;
throttle_zone $http_x_key zone=async:1m rate=1r/m burst=1 redis=main sync=async sync_interval=100ms;
--- config
location = /a.txt {
    throttle zone=local;
    throttle zone=strict;
    throttle zone=async;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x2 => 200
  > X-Key: k
GET /a.txt x2 => 429
  > X-Key: k
perl {
    my $runs = 'nginx_throttle_sync_runs_total{zone="async",result="ok"}';
    ok(wait_until(5, sub { metrics()->{$runs} >= 1 }),
       "$name: the async zone synced");
    my $text = metrics_text();
    my ($rc, $out) = Prometheus::promtool_check($text);
    is($rc, 0, "$name: promtool check metrics exits 0");
    is($out, '', "$name: and prints nothing (no error, no warning)");
    # the check can fail: a counter without _total is one promtool names
    ($rc, $out) = Prometheus::promtool_check("# HELP x y\n# TYPE x counter\nx 1\n");
    isnt($rc, 0, "$name: promtool does fault a counter named without _total");
    my @families = eval { main::families_of($text) };
    is($@, '', "$name: each family once, its samples under it");
    # build_info, the zones' families, then the backends', each part sorted
    my @backends = grep { /^nginx_throttle_redis_/ } @families;
    my @zones = grep { !/^nginx_throttle_redis_|build_info/ } @families;
    is_deeply(\@families,
              ['nginx_throttle_build_info', sort(@zones), sort(@backends)],
              "$name: build_info, then the zones' and the backends' families, "
              . "each sorted by name");
    is(scalar @zones, 14, "$name: the zones' 14 families") or diag("@families");
    is(scalar @backends, 4, "$name: a single server's 4 families")
        or diag("@families");
}



=== TEST 2: a real Prometheus scrapes /metrics every second: its API answers the values nginx sent, the alerting rules evaluate, and a zone that rejects most requests has its alert pending
--- http_config
throttle_zone $http_x_key zone=reply:1m rate=30r/m burst=15;
throttle_zone $http_x_key zone=preview:1m rate=1r/m burst=0;
--- config
location = /a.txt {
    throttle zone=reply;
}
location = /b.txt {
    throttle zone=preview;
    throttle_dry_run on;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt x16 => 200
  > X-Key: alice
GET /a.txt x4 => 429
  > X-Key: alice
GET /b.txt x3 => 200
  > X-Key: bob
perl {
    my ($rc, $out) = Prometheus::promtool_check_rules($main::RULES);
    is($rc, 0, "$name: promtool check rules accepts the rules")
        or diag($out);

    my $sent = metrics();
    my $prometheus = Prometheus->start(target => "127.0.0.1:$nginx->{port}",
                                       metrics_path => '/metrics',
                                       rules => $main::RULES);
    # (Prometheus 2.42 starts scraping a target some 5 s after it starts)
    ok($prometheus->wait_for_scrapes(1), "$name: Prometheus scraped nginx");

    my ($target) = grep { $_->{labels}{job} eq 'nginx' }
                   @{ $prometheus->targets };
    is($target->{health}, 'up', "$name: the target is up");
    is($target->{lastError}, '', "$name: the last scrape had no error");

    my %got;
    for my $series (@{ $prometheus->query('nginx_throttle_requests_total') }) {
        my $l = $series->{metric};
        $got{"nginx_throttle_requests_total{zone=\"$l->{zone}\",result=\"$l->{result}\"}"}
            = $series->{value}[1];
    }
    my %want = map { $_ => $sent->{$_} }
               grep { /^nginx_throttle_requests_total\{/ } keys %$sent;
    is_deeply(\%got, \%want, "$name: the requests_total series as sent")
        or diag(explain \%got, \%want);
    is($got{'nginx_throttle_requests_total{zone="reply",result="passed"}'}, 16,
       "$name: 16 passed in reply");
    is($got{'nginx_throttle_requests_total{zone="reply",result="rejected"}'}, 4,
       "$name: 4 rejected in reply");
    is($got{'nginx_throttle_requests_total{zone="preview",result="rejected_dry_run"}'},
       2, "$name: 2 rejected in dry run in preview");

    my $build = $prometheus->query('nginx_throttle_build_info');
    is(scalar @$build, 1, "$name: one build_info series");
    like($build->[0]{metric}{version}, qr/^\d+\.\d+\.\d+$/,
         "$name: with the version");

    # rejections only, between scrapes: reply rejects all it decides now
    request('GET /a.txt', 'X-Key' => 'alice') for 1 .. 5;
    my $pending = sub {
        grep { $_->{labels}{alertname} eq 'ThrottleZoneRejecting'
               && $_->{labels}{zone} eq 'reply' } @{ $prometheus->alerts };
    };
    ok(wait_until(10, $pending), "$name: ThrottleZoneRejecting is pending for reply")
        or diag(explain $prometheus->alerts);
    my @rules = @{ $prometheus->rules };
    is(scalar @rules, 7, "$name: 7 rules loaded");
    is_deeply([grep { $_->{health} ne 'ok' } @rules], [],
              "$name: every rule evaluated without error");
    $prometheus->stop;
}
