# SPDX-License-Identifier: BSD-2-Clause
package RedisChecks;

# What Redis holds for the module's zones, for the test files that look:
#
#     async_key($zone, $key)      an async zone's key under the default
#                                 prefix: "throttle:{<zone>:<shard>}:<key>"
#                                 (RedisServer::async_key)
#     all_expire($redis, $label)  a test: every key in Redis has a TTL
#                                 (PTTL > 0: none is kept forever)
#
# Nothing is exported unless asked for.

use strict;
use warnings;

use Exporter 'import';
use Test::More ();
use RedisServer ();

our @EXPORT_OK = qw(async_key all_expire);

sub async_key { RedisServer::async_key('throttle:', @_) }

sub all_expire {
    my ($redis, $label) = @_;
    my @keys = $redis->keys_matching('*');
    my @bad = grep { my $t = $redis->cmd('PTTL', $_); !($t > 0) && "$_ ($t)" } @keys;
    Test::More::is("@bad", '',
                   "$label: all " . scalar(@keys) . ' keys in Redis have a TTL');
}

1;
