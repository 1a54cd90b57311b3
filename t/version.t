# SPDX-License-Identifier: BSD-2-Clause
# The module's version in error.log: a dynamic module has no line in
# "nginx -V", so the master logs "ngx_http_throttle_module VERSION" at
# notice once each time it loads a configuration (init_module), whether or
# not the configuration uses the module; workers and "nginx -s" do not.

use strict;
use warnings;

use Test::More;

use ThrottleTest;

our $VERSION = module_version();

# The pids of error.log's version lines, after checking there are $count.
sub version_lines_are {
    my ($name, $count) = @_;
    my @pids = ThrottleTest::Step::error_log()
        =~ /^\S+ \S+ \[notice\] (\d+)#\d+: ngx_http_throttle_module \Q$VERSION\E$/mg;
    is(scalar @pids, $count, "$name: $count version line(s) in error.log");
    return @pids;
}

run_blocks();

__DATA__

=== TEST 1: logged once at start and once more by the master at a reload
--- config
location / {
}
--- requests
GET /a.txt => 200
perl: main::version_lines_are($name, 1)
--- reload_config
location / {
    add_header X-Gen 2;
}
--- requests_after_reload
GET /a.txt => 200
  X-Gen: 2
perl {
    my @pids = main::version_lines_are($name, 2);
    is($pids[1], $nginx->{master}, "$name: the master logged the reload's");
}
