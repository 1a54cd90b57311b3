#!/usr/bin/perl
# SPDX-License-Identifier: BSD-2-Clause
# make sanitize's check of its own setup: nginx started as the integration
# tests start it (TEST_NGINX_BINARY preloads the runtimes), with the module
# of planted bugs (probe/, named by TEST_THROTTLE_MODULE) instead of the
# throttle module. Its workers leak a block each when they start; a
# request to /plant makes a worker pass NULL to memcpy, then write past a
# heap block, which ends it; the graceful stop then makes the workers look
# for leaks. check_reports.pl --planted says whether the three reports
# arrived. Prints who the workers run as: reports are written as them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../../t/lib";

use Processes qw(children_of wait_until);
use ThrottleTest;

my $nginx = start_instance(config => "location = /plant { sanitize_probe; }");

# A worker is its master's user until it has set itself up.
my $master_user = user_of($nginx->{master});
my @users;
wait_until(2, sub {
    @users = map { user_of($_) } children_of($nginx->{master});
    return !grep { $_ eq $master_user } @users;
});
print "plant: nginx's master runs as $master_user, its workers as @users\n";

my $res = http_request($nginx, 'GET /plant');
print "plant: GET /plant: ",
    ($res->{error} // "a response ($res->{status}): the worker lives on"),
    "\n";

my $log = stop_instance($nginx);
print "plant: nginx logged: $1\n"
    while $log =~ /\[\w+\] [\d#]+: (worker process \d+ exited .*)$/mg;

# The user a process runs as.
sub user_of {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return "? (pid $pid is gone)";
    my ($uid) = join('', <$fh>) =~ /^Uid:\s+(\d+)/m;
    return scalar(getpwuid $uid) // $uid;
}
