# SPDX-License-Identifier: BSD-2-Clause
# settle= with the rest of a location's lines and of nginx's request
# flow (docs/settle.md, docs/phases.md): a request delay= held back
# settles once it ran; each zone settles once per main request, in either
# phase, across internal redirects (error_page, X-Accel-Redirect,
# rewrite); a request refused by any zone settles nothing, and the other
# zones' keys keep what they held; subrequests and dry-run rejections
# settle nothing. Every block logs $throttle_settled.
#
# Local zones, with a real upstream (a server of the same nginx on a unix
# socket, answering X-Tokens-Used: ?used=). What a key holds is read
# through a throttle_api location (cost=0: a look), at 1r/m so nothing
# drains meanwhile; a request's settle is done (its line logged) before
# the next request that depends on it. Then, in a plain script before the
# blocks: a reload while a strict zone's settle waits in a paused
# redis-server. Last, a strict block: what a GCRA zone remembers of
# Redis's answers after a settle's refund.

use strict;
use warnings;

use Prometheus ();
use RedisServer;
use Responses ();
use Test::More;
use ThrottleTest;

package ThrottleTest::Step;

use SettleChecks qw(settled_lines_are settles_are);

# What the zones' keys have left, checked with a look through
# /throttle: remaining_are($name, 'zone/key' => units, ...).
sub remaining_are {
    my ($name, %want) = @_;
    for my $which (sort keys %want) {
        my ($zone, $key) = split m{/}, $which;
        my $res = request("GET /throttle?zone=$zone&key=$key&cost=0");
        my ($left) = ($res->{body} // '') =~ /"remaining":(\d+)/;
        Test::More::is($left, $want{$which},
                       "$name: $which has $want{$which} left");
    }
}

package main;

use SettleChecks qw(settle_in_flight);

require_redis_module();

# A reload while a settle is on its way to a strict zone's Redis: the old
# worker exits only once Redis has answered, within the backend's
# timeout, while the new ones serve; they see the zone's count of it.
settle_in_flight('strict, reload with a settle on its way', sub {
    my ($env) = @_;
    my $name = 'strict, reload with a settle on its way';
    my ($ok, $text) = ThrottleTest::Nginx::reload_nginx($env, $env->{master});
    ok($ok, "$name: the reload is done") or diag($text);
    my $m = Prometheus::parse(http_request($env, 'GET /metrics')->{body} // '');
    is($m->{"nginx_throttle_settles_total{zone=\"tokens\",result=\"$_->[0]\"}"}
       // 0, $_->[1], "$name: settles $_->[0]: $_->[1]")
        for [charged => 1], [lost => 0];
});

run_blocks();

__DATA__

Every block's http{} has the upstream (@upstream) and logs
"$throttle_settled $status" of the server under test to settled.log
(@logged); /throttle looks at the zones' keys, /metrics counts their
settles. Keys are ?key=, settle values ?used= unless a block says.

--- @upstream
log_format settled '$throttle_settled $status';
throttle_log_level notice;

server {
    listen unix:$TEST_NGINX_PREFIX/up-$TEST_NGINX_PORT.sock;
    access_log off;
    location / {
        add_header X-Tokens-Used $arg_used;
        return 200 "ok\n";
    }
    # the answer is elsewhere: nginx's internal redirect to /inner/
    location /accel/ {
        add_header X-Accel-Redirect /inner/x?$args;
        return 200;
    }
}

--- @logged
access_log $TEST_NGINX_PREFIX/logs/settled.log settled;

--- @metrics
location = /metrics {
    access_log off;
    throttle_metrics;
}

--- @up
proxy_pass http://unix:$TEST_NGINX_PREFIX/up-$TEST_NGINX_PORT.sock:/;

=== TEST 1: delay=: a request held back settles once it ran, once
--- http_config
@upstream
log_format timed '$throttle_settled $status $request_time';
throttle_zone $arg_key zone=d:1m rate=1r/s burst=5;
--- config
location /v1/ {
    throttle zone=d delay=0 settle=$upstream_http_x_tokens_used;
    access_log $TEST_NGINX_PREFIX/logs/settled.log timed;
    @up
}
location = /throttle {
    access_log off;
    throttle_api zones=d;
}
@metrics
--- requests
GET /v1/x?key=k&used=1 => 200
  RateLimit: "d";r=5;t=1
# T = 1 s: the second waits a second, then its upstream says 4
GET /v1/x?key=k&used=4 => 200
  RateLimit: "d";r=4;t=2
perl {
    my $log = "$nginx->{prefix}/logs/settled.log";
    wait_until(5, sub { (() = Processes::read_file($log) =~ /\n/g) >= 2 });
    my @lines = split /\n/, Processes::read_file($log);
    like($lines[0] // '', qr/^1 200 0\.0\d\d$/, "$name: the first went at once");
    like($lines[1] // '', qr/^4 200 (0\.9\d\d|1\.\d\d\d)$/,
         "$name: the second settled 4 once it ran, held back a second");
    settles_are($name, zone => 'd', even => 1, charged => 1);
    # it went a second after it came, 2 s of the funnel ahead; its 3
    # units more put the TAT 5 s ahead then, 4 s now: 6 - 4 units left
    remaining_are($name, 'd/k' => 2);
}



=== TEST 2: both phases: each zone settles once; a request the authorized zone refuses settles nothing
--- http_config
@upstream
throttle_zone $arg_key zone=pre:1m rate=1r/m burst=9;
throttle_zone $arg_key zone=post:1m rate=1r/m burst=2;
--- config
@logged
location /both/ {
    throttle zone=pre settle=$arg_used;
    throttle zone=post phase=authorized settle=$arg_used;
    @up
}
location /authorized/ {
    throttle zone=post phase=authorized settle=$upstream_http_x_tokens_used;
    @up
}
location = /throttle {
    access_log off;
    throttle_api zones=pre,post;
}
@metrics
--- requests
GET /both/x?key=k&used=4 => 200
perl {
    settled_lines_are($name, '4 200');
    settles_are($name, zone => 'pre', charged => 1);
    settles_are($name, zone => 'post', charged => 1);
    remaining_are($name, 'pre/k' => 6, 'post/k' => 0);
}
# pre admits it (and keeps its reservation), post refuses it: a 429
# settles nothing, in either zone
GET /both/x?key=k&used=9 => 429
perl {
    settled_lines_are($name, '4 200', '- 429');
    settles_are($name, zone => 'pre', charged => 1);
    settles_are($name, zone => 'post', charged => 1);
    remaining_are($name, 'pre/k' => 5, 'post/k' => 0);
}
# authorized lines alone
GET /authorized/x?key=j&used=0 => 200
  RateLimit: "post";r=2;t=60
perl {
    settled_lines_are($name, '4 200', '- 429', '0 200');
    settles_are($name, zone => 'post', charged => 1, refunded => 1);
    remaining_are($name, 'post/j' => 3);
}



=== TEST 3: several zones: both charged, both settle; one refuses, neither settles
--- http_config
@upstream
throttle_zone $arg_key zone=roomy:1m rate=1r/m burst=9;
throttle_zone $arg_key zone=tight:1m rate=1r/m burst=1;
--- config
@logged
location /v1/ {
    throttle zone=roomy settle=$arg_used;
    throttle zone=tight settle=$arg_t;
    @up
}
location = /throttle {
    access_log off;
    throttle_api zones=roomy,tight;
}
@metrics
--- requests
# tight binds (the fewest left): $throttle_settled is its value
GET /v1/x?key=k&used=3&t=2 => 200
  RateLimit: "tight";r=1;t=60
perl {
    settled_lines_are($name, '2 200');
    settles_are($name, zone => 'roomy', charged => 1);
    settles_are($name, zone => 'tight', charged => 1);
    remaining_are($name, 'roomy/k' => 7, 'tight/k' => 0);
}
GET /v1/x?key=k&used=5&t=5 => 429
  RateLimit: "tight";r=0;t=120
perl {
    settled_lines_are($name, '2 200', '- 429');
    settles_are($name, zone => 'roomy', charged => 1);
    settles_are($name, zone => 'tight', charged => 1);
    # roomy was charged nothing for it, and keeps the 3 units
    remaining_are($name, 'roomy/k' => 7, 'tight/k' => 0);
}



=== TEST 4: internal redirects: error_page, X-Accel-Redirect, rewrite; one settle per zone
--- http_config
@upstream
throttle_zone $arg_key zone=r:1m rate=1r/m burst=9;
throttle_zone $arg_key zone=q:1m rate=1r/m burst=9;
--- config
@logged
# no such file: error_page sends it to @up
location /e/ {
    throttle zone=r settle=$arg_used;
    error_page 404 = @up;
}
# decided in /e/: q on its way takes no part, and settles nothing
location @up {
    throttle zone=r settle=$upstream_http_x_tokens_used;
    throttle zone=q settle=$upstream_http_x_tokens_used;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/up-$TEST_NGINX_PORT.sock;
}
# the upstream answers with X-Accel-Redirect to /inner/
location /accel/ {
    throttle zone=r settle=$upstream_http_x_tokens_used;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/up-$TEST_NGINX_PORT.sock;
}
location /inner/ {
    internal;
    throttle zone=r settle=$upstream_http_x_tokens_used;
    @up
}
# rewrites before any zone decides: decided, and settled, in /e/
location /rw/ {
    throttle zone=q settle=$arg_used;
    rewrite ^/rw/(.*)$ /e/$1 last;
}
location = /throttle {
    access_log off;
    throttle_api zones=r,q;
}
@metrics
--- requests
GET /e/x?key=a&used=4 => 200
  RateLimit: "r";r=9;t=60
perl {
    settled_lines_are($name, '4 200');
    settles_are($name, zone => 'r', charged => 1);
    settles_are($name, zone => 'q');
    remaining_are($name, 'r/a' => 6, 'q/a' => 10);
}
GET /accel/x?key=b&used=3 => 200
  RateLimit: "r";r=9;t=60
perl {
    settled_lines_are($name, '4 200', '3 200');
    settles_are($name, zone => 'r', charged => 2);
    remaining_are($name, 'r/b' => 7);
}
GET /rw/x?key=c&used=0 => 200
  RateLimit: "r";r=9;t=60
perl {
    settled_lines_are($name, '4 200', '3 200', '0 200');
    settles_are($name, zone => 'r', charged => 2, refunded => 1);
    settles_are($name, zone => 'q');
    remaining_are($name, 'r/c' => 10, 'q/c' => 10);
}



=== TEST 5: subrequests settle nothing: auth_request's location has a settle= line
--- http_config
@upstream
throttle_zone $arg_key zone=main:1m rate=1r/m burst=9;
# a subrequest has no args of its own: the key and the value are headers
throttle_zone $http_x_key zone=sub:1m rate=1r/m burst=9;
--- config
@logged
location /s/ {
    auth_request /_auth;
    throttle zone=main settle=$upstream_http_x_tokens_used;
    @up
}
# logged, so nginx runs its log phase (the settle's) for it too
location = /_auth {
    internal;
    log_subrequest on;
    throttle zone=sub settle=$http_x_used;
    @up
}
location = /throttle {
    access_log off;
    throttle_api zones=main,sub;
}
@metrics
--- requests
GET /s/x?key=k&used=3 => 200
  > X-Key: k
  > X-Used: 3
# settled (its line is logged) before the next one
perl: settled_lines_are($name, '- 200', '3 200')
GET /s/x?key=k&used=0 => 200
  > X-Key: k
  > X-Used: 0
perl {
    # the subrequests' lines, then the requests'
    settled_lines_are($name, '- 200', '3 200', '- 200', '0 200');
    settles_are($name, zone => 'main', charged => 1, refunded => 1);
    settles_are($name, zone => 'sub');
    remaining_are($name, 'main/k' => 7, 'sub/k' => 10);
}



=== TEST 6: dry run: a request the zone would refuse settles nothing; one it admits settles
--- http_config
@upstream
throttle_zone $arg_key zone=dry:1m rate=1r/m burst=1;
--- config
@logged
location /v1/ {
    throttle_dry_run on;
    throttle zone=dry settle=$upstream_http_x_tokens_used;
    @up
}
location = /throttle {
    access_log off;
    throttle_api zones=dry;
}
@metrics
--- requests
GET /v1/x?key=k&used=3 => 200
# settled before the next one comes: in debt, it would be refused, and
# goes through
perl: settled_lines_are($name, '3 200')
GET /v1/x?key=k&used=0 => 200
perl: settled_lines_are($name, '3 200', '- 200')
GET /v1/x?key=k&used=9 => 200
perl {
    settled_lines_are($name, '3 200', '- 200', '- 200');
    settles_are($name, zone => 'dry', charged => 1);
    # 3 units on a key of 2 at 1r/m: no refund came of the 0
    remaining_are($name, 'dry/k' => 0);
}
GET /throttle?zone=dry&key=k&cost=0 => 429
  Retry-After: {60-}
--- error_log
throttled by zone "dry" (dry run), retry after



=== TEST 7: strict GCRA: a settle's refund, then a request Redis would admit
--- redis
redis
--- http_config
@upstream
throttle_redis main server=127.0.0.1:$TEST_REDIS_PORT;
throttle_zone $arg_key zone=s:1m rate=1r/m burst=4 redis=main;
--- config
@logged
location /v1/ {
    throttle zone=s cost=5 settle=$arg_used;
    @up
}
location /one/ {
    throttle zone=s settle=$arg_used;
    @up
}
@metrics
--- requests
# 5 reserved, the whole key; 1 used: 4 given back in Redis
GET /v1/x?key=k&used=1 => 200
  RateLimit: "s";r=0;t=300
perl: settles_are($name, zone => 's', refunded => 1)
# Redis holds 1 unit of 5: it admits one more, with 3 left
GET /one/x?key=k&used=1 => 200
  RateLimit: "s";r=3;t=120
