# SPDX-License-Identifier: BSD-2-Clause
# docs/prometheus-rules.yml, the example alerting rules: valid for
# Prometheus (promtool check rules, no warning), and each alert fires on
# series that call for it and only there (promtool test rules, with the
# series in t/prometheus/rules_test.yml).

use strict;
use warnings;

use Test::More;

my ($promtool) = grep { -x } map { "$_/promtool" } split /:/, $ENV{PATH};
ok($promtool, 'promtool is installed (Debian package prometheus)')
    or BAIL_OUT('promtool missing: make test installs the prometheus package');

sub run_promtool {
    my @args = @_;
    my $out = `$promtool @args 2>&1`;
    return ($? >> 8, $out);
}

my ($rc, $out) = run_promtool(qw(check rules docs/prometheus-rules.yml));
is($rc, 0, 'promtool check rules: valid') or diag($out);
like($out, qr/SUCCESS: 7 rules found/, 'promtool found the 7 rules');
unlike($out, qr/warning/i, 'promtool check rules: no warning') or diag($out);

($rc, $out) = run_promtool(qw(test rules t/prometheus/rules_test.yml));
is($rc, 0, 'promtool test rules: every alert as expected') or diag($out);

done_testing();
