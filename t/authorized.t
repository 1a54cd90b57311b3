# SPDX-License-Identifier: BSD-2-Clause
# throttle ... phase=authorized: lines that decide once the access phase has
# let the request in, so that their key (or cost) may come from
# auth_request_set. No Redis here: local zones.
#
# Every block has a real auth backend: a second server of the same nginx,
# on a unix socket in the block's prefix, that reads a bearer token and
# answers 200 with X-User (and X-Cost: 2 for carol, 1 for the others) or
# 401, and 204 to /mirror. Its access_log counts the requests that reached
# it. The server under test asks it through auth_request and keeps its
# answers in $uid and $cost; its responses carry $throttle_status as
# X-Status (absent when no phase decided).

use strict;
use warnings;

use ThrottleTest;

# The http{} part of a block: the auth backend, then the block's own lines.
sub auth_backend {
    my ($lines) = @_;
    return q{
access_log off;

map $http_authorization $auth_user {
    "Bearer alice-token" alice;
    "Bearer bob-token"   bob;
    "Bearer carol-token" carol;
    default              "";
}

map $auth_user $auth_cost {
    carol   2;
    default 1;
}

server {
    listen unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock;
    access_log $TEST_NGINX_PREFIX/logs/auth.log;

    location = /auth {
        if ($auth_user = "") {
            return 401;
        }
        add_header X-User $auth_user;
        add_header X-Cost $auth_cost;
        return 200;
    }
    location = /mirror {
        return 204;
    }
}
} . $lines;
}

# The server{} part of a block: every location behind auth_request (unless
# it says auth_request off), then the block's locations. $auth_lines go into
# the location of the auth subrequest itself.
sub behind_auth {
    my ($locations, $auth_lines) = @_;
    $auth_lines //= '';
    return qq{
auth_request /_auth;
auth_request_set \$uid \$upstream_http_x_user;
auth_request_set \$cost \$upstream_http_x_cost;
add_header X-Status \$throttle_status always;

location = /_auth {
    internal;
    auth_request off;
    proxy_pass http://unix:\$TEST_NGINX_PREFIX/auth-\$TEST_NGINX_PORT.sock:/auth;
$auth_lines}
$locations};
}

package ThrottleTest::Step;

# The requests for $path (/auth, /mirror) the backend has answered so far
# must be $want: the lines of its access_log that name it. Its worker
# writes a line just after it answered, maybe while another worker already
# goes on: wait for $want lines at most $TIMEOUT, then compare (one too
# many fails at once).
sub backend_hits_are {
    my ($name, $path, $want, $what) = @_;
    my $log = "$ThrottleTest::Step::CURRENT->{prefix}/logs/auth.log";
    my $hits = sub {
        scalar(() = Processes::read_file($log) =~ m{"GET \Q$path\E }g);
    };
    Processes::wait_until($Processes::TIMEOUT, sub { $hits->() >= $want });
    Test::More::is($hits->(), $want,
                   "$name: $want requests for $path reached the backend: $what");
}

package main;

run_blocks();

__DATA__

=== TEST 1: the issue's configuration in the default phase: $uid is still empty in preaccess, nothing is limited
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=2;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=u;
}
location = /b.txt {
    throttle zone=u phase=preaccess;
}
})
--- requests
GET /a.txt x5 => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  no RateLimit
  no Retry-After
GET /b.txt x5 => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  no RateLimit
--- no_error_log
throttled by zone



=== TEST 2: the issue's configuration with phase=authorized: 3 of 5 per user, a bad token is refused by the backend
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=2;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=u phase=authorized;
}
})
--- requests
GET /a.txt => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  RateLimit-Policy: "u";q=3;w=180
  RateLimit: "u";r=2;t={60-}
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "u";r=1;t={120-}
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "u";r=0;t={180-}
GET /a.txt x2 => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit-Policy: "u";q=3;w=180
  RateLimit: "u";r=0;t={180-}
# bob has a key of his own; each request of a keep-alive connection is
# decided
keepalive {
GET /a.txt => 200
  > Authorization: Bearer bob-token
  X-Status: PASSED
  RateLimit: "u";r=2;t={60-}
GET /a.txt x2 => 200
  > Authorization: Bearer bob-token
GET /a.txt x2 => 429
  > Authorization: Bearer bob-token
  X-Status: REJECTED
  RateLimit: "u";r=0;t={180-}
}
# refused by the access phase: the authorized phase never decides
GET /a.txt => 401
  > Authorization: Bearer stolen-token
  no X-Status
  no RateLimit
  no Retry-After
perl: backend_hits_are($name, '/auth', 11, 'every request, rejected or not')
--- error_log
throttled by zone "u", retry after



=== TEST 3: 401s from the backend are not counted by an authorized zone whose key exists before auth; a preaccess zone counts them
--- http_config eval
main::auth_backend(q{
throttle_zone $http_x_client zone=c:1m rate=1r/m burst=2;
})
--- config eval
main::behind_auth(q{
location = /a.txt {
    throttle zone=c phase=authorized;
}
location = /b.txt {
    throttle zone=c;
}
})
--- requests
# authorized: five bad tokens from client m, then m's valid requests get
# the whole burst
GET /a.txt x5 => 401
  > X-Client: m
  > Authorization: Bearer stolen-token
  no X-Status
  no RateLimit
GET /a.txt => 200
  > X-Client: m
  > Authorization: Bearer alice-token
  X-Status: PASSED
  RateLimit: "c";r=2;t={60-}
GET /a.txt x2 => 200
  > X-Client: m
  > Authorization: Bearer alice-token
GET /a.txt => 429
  > X-Client: m
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  RateLimit: "c";r=0;t={180-}
perl: backend_hits_are($name, '/auth', 9, 'the five 401s and the four valid requests')
# preaccess: the zone counts client e's bad tokens; once it is spent they
# never reach the backend, and e's valid requests are rejected too
GET /b.txt x3 => 401
  > X-Client: e
  > Authorization: Bearer stolen-token
  X-Status: PASSED
  RateLimit ~ ^"c";r=[210];
GET /b.txt x2 => 429
  > X-Client: e
  > Authorization: Bearer stolen-token
  X-Status: REJECTED
GET /b.txt => 429
  > X-Client: e
  > Authorization: Bearer alice-token
  X-Status: REJECTED
perl: backend_hits_are($name, '/auth', 12, 'three more: the 401s the preaccess zone let through')



=== TEST 4: error_page 401 to a location that inherits an authorized zone: the 401 page is not counted
--- http_config eval
main::auth_backend(q{
throttle_zone $http_x_client zone=c:1m rate=1r/m burst=1;
})
--- user_files
>>> 401.html
please log in
--- config eval
main::behind_auth(q{
throttle zone=c phase=authorized;
error_page 401 /401.html;

location = /401.html {
    auth_request off;
}
location / {
}
})
--- requests
GET /a.txt x4 => 401
  > X-Client: m
  > Authorization: Bearer stolen-token
  body: please log in
  no X-Status
  no RateLimit
# the page's location is limited when it is asked for itself
GET /401.html => 200
  > X-Client: another
  X-Status: PASSED
  RateLimit: "c";r=1;t={60-}
  body: please log in
# m's whole burst is left
GET /a.txt => 200
  > X-Client: m
  > Authorization: Bearer alice-token
  RateLimit: "c";r=1;t={60-}
GET /a.txt => 200
  > X-Client: m
  > Authorization: Bearer alice-token
  RateLimit: "c";r=0;t={120-}
GET /a.txt => 429
  > X-Client: m
  > Authorization: Bearer alice-token
  X-Status: REJECTED



=== TEST 5: error_page 429 to a location with an authorized zone: a preaccess rejection is not counted there, an authorized one not twice
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=0;
throttle_zone $http_x_client zone=c:1m rate=1r/m burst=1;
})
--- user_files
>>> 429.html
slow down
--- config eval
main::behind_auth(q{
error_page 429 /429.html;

location = /a.txt {
    throttle zone=addr;
}
location = /b.txt {
    throttle zone=c phase=authorized;
}
location = /429.html {
    auth_request off;
    throttle zone=c phase=authorized;
}
})
--- requests
GET /a.txt => 200
  > X-Client: m
  > Authorization: Bearer alice-token
GET /a.txt x3 => 429
  > X-Client: m
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  RateLimit: "addr";r=0;t={60-}
  body: slow down
# c was not charged for m's three rejections
GET /429.html => 200
  > X-Client: m
  X-Status: PASSED
  RateLimit: "c";r=1;t={60-}
# n: rejected by c itself, the page is served, and c is not asked again
GET /b.txt x2 => 200
  > X-Client: n
  > Authorization: Bearer alice-token
GET /b.txt x2 => 429
  > X-Client: n
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit: "c";r=0;t={120-}
  body: slow down
--- no_error_log
rewrite or internal redirection cycle



=== TEST 6: both phases in one location: a user rejection was charged by the address zone; an address rejection reaches neither the backend nor the user zone
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=3;
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=addr;
    throttle zone=u phase=authorized;
    # the server's add_header does not apply where a location has its own
    add_header X-Remaining $throttle_remaining always;
    add_header X-Status $throttle_status always;
}
# zone u alone, to read a user's state
location = /b.txt {
    throttle zone=u phase=authorized;
}
})
--- requests
# both pass: the zone with the fewest units left answers, u (addr has 3
# left, then 2)
GET /a.txt => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  RateLimit: "u";r=1;t={60-}
  X-Remaining: 1
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "u";r=0;t={120-}
# u rejects in the authorized phase; addr (preaccess) charged it already
GET /a.txt => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit-Policy: "u";q=2;w=120
  RateLimit: "u";r=0;t={120-}
  X-Remaining: 0
perl: backend_hits_are($name, '/auth', 3, "alice's three requests")
# addr's 4th and last unit: alice's rejected request was charged
GET /a.txt => 200
  > Authorization: Bearer bob-token
  X-Status: PASSED
  RateLimit-Policy: "addr";q=4;w=240
  RateLimit: "addr";r=0;t={240-}
GET /a.txt => 429
  > Authorization: Bearer bob-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit: "addr";r=0;t={240-}
perl: backend_hits_are($name, '/auth', 4, 'bob\'s request rejected by addr did not')
# u charged bob once: his second unit is left
GET /b.txt => 200
  > Authorization: Bearer bob-token
  RateLimit: "u";r=0;t={120-}
--- error_log
throttled by zone "u"
throttled by zone "addr"



=== TEST 7: the answer is the phase's that says most: an error in preaccess over a pass, a rejection over an error
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=9;
throttle_zone $uid zone=u:1m rate=1r/m burst=0;
})
--- config eval
main::behind_auth(q{
location = /a.txt {
    throttle zone=addr cost=$arg_cost;
    throttle zone=u phase=authorized;
}
location = /b.txt {
    throttle_on_error deny;
    throttle zone=addr cost=$arg_cost;
    throttle zone=u phase=authorized;
}
})
--- requests
# addr fails (cost "x") and lets the request through; u passes
GET /a.txt?cost=x => 200
  > Authorization: Bearer alice-token
  X-Status: ERROR_ALLOWED
  no RateLimit
# addr fails again; u rejects
GET /a.txt?cost=x => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit: "u";r=0;t={60-}
perl: backend_hits_are($name, '/auth', 2, "alice's two requests")
# denied on error in preaccess: never reaches the backend nor u
GET /b.txt?cost=x => 429
  > Authorization: Bearer bob-token
  X-Status: ERROR_DENIED
perl: backend_hits_are($name, '/auth', 2, 'not the one denied in preaccess')
GET /b.txt?cost=1 => 200
  > Authorization: Bearer bob-token
  X-Status: PASSED
  RateLimit: "u";r=0;t={60-}
--- error_log
throttle: cost "x" for zone "addr" is not a non-negative integer



=== TEST 8: satisfy any: allow lets requests in without a token, the authorized zone counts them; its 403 and 401 are final
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=allowed:1m rate=1r/m burst=1;
throttle_zone $remote_addr zone=s403:1m rate=1r/m burst=0;
throttle_zone $remote_addr zone=s401:1m rate=1r/m burst=0;
})
--- config eval
main::behind_auth(q{
satisfy any;
allow 127.0.0.1;
deny all;

location = /a.txt {
    throttle zone=allowed phase=authorized;
}
location = /b.txt {
    throttle zone=s403 phase=authorized;
    throttle_status 403;
}
location = /index.html {
    throttle zone=s401 phase=authorized;
    throttle_status 401;
}
})
--- requests
GET /a.txt => 200
  X-Status: PASSED
  RateLimit: "allowed";r=1;t={60-}
GET /a.txt => 200
  RateLimit: "allowed";r=0;t={120-}
GET /a.txt => 429
  X-Status: REJECTED
  Retry-After: {60-}
# a valid token would pass the auth check: the 403 and 401 are the
# module's, not failed access checks that satisfy any passes over
GET /b.txt => 200
  X-Status: PASSED
GET /b.txt => 403
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit: "s403";r=0;t={60-}
GET /index.html => 200
  X-Status: PASSED
GET /index.html => 401
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  Retry-After: {60-}
  RateLimit: "s401";r=0;t={60-}



=== TEST 9: satisfy any with no allow that matches: a bad token gets 401 and is not counted
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
satisfy any;
deny all;

location / {
    throttle zone=addr phase=authorized;
}
})
--- requests
GET /a.txt x4 => 401
  > Authorization: Bearer stolen-token
  no X-Status
  no RateLimit
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=1;t={60-}
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=0;t={120-}
GET /a.txt => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED



=== TEST 10: try_files to a named location: the first location's authorized zone is charged, once
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=a:1m rate=1r/m burst=1;
throttle_zone $uid zone=b:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
location /same/ {
    throttle zone=a phase=authorized;
    try_files $uri @same;
}
location @same {
    throttle zone=a phase=authorized;
    try_files /b.txt =404;
}
location /other/ {
    throttle zone=a phase=authorized;
    try_files $uri @other;
}
location @other {
    throttle zone=b phase=authorized;
    try_files /b.txt =404;
}
location = /b.txt {
    throttle zone=b phase=authorized;
}
})
--- requests
GET /same/x => 200
  > Authorization: Bearer alice-token
  RateLimit: "a";r=1;t={60-}
  body: b
GET /same/x => 200
  > Authorization: Bearer alice-token
  RateLimit: "a";r=0;t={120-}
  body: b
GET /same/x => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
GET /other/x => 200
  > Authorization: Bearer bob-token
  RateLimit: "a";r=1;t={60-}
  body: b
GET /other/x => 200
  > Authorization: Bearer bob-token
  RateLimit: "a";r=0;t={120-}
# zone b of the named location was not charged
GET /b.txt => 200
  > Authorization: Bearer bob-token
  RateLimit: "b";r=1;t={60-}



=== TEST 11: error_page 404 and index: counted once in the authorized phase
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=u phase=authorized;
    error_page 404 /index.html;
}
})
--- requests
GET /missing.txt => 404
  > Authorization: Bearer alice-token
  RateLimit: "u";r=1;t={60-}
  body: index page
GET /missing.txt => 404
  > Authorization: Bearer alice-token
  RateLimit: "u";r=0;t={120-}
  body: index page
GET /missing.txt => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
GET /dir/ => 200
  > Authorization: Bearer bob-token
  RateLimit: "u";r=1;t={60-}
  body: dir index
GET /dir/ => 200
  > Authorization: Bearer bob-token
  RateLimit: "u";r=0;t={120-}
  body: dir index
GET /dir/ => 429
  > Authorization: Bearer bob-token
  X-Status: REJECTED



=== TEST 12: along internal redirects each phase decides once, at the first location with lines of that phase
--- http_config eval
main::auth_backend(q{
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=9;
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
location /p/ {
    throttle zone=addr;
    try_files $uri @limited;
}
location @limited {
    throttle zone=addr;
    throttle zone=u phase=authorized;
    try_files /a.txt =404;
}
location /q/ {
    throttle zone=u phase=authorized;
    try_files $uri @counted;
}
location @counted {
    throttle zone=addr;
    try_files /a.txt =404;
}
# zone addr alone, to read its state
location = /b.txt {
    throttle zone=addr;
}
})
--- requests
# /p/ has only preaccess lines: the authorized phase decides in @limited,
# whose preaccess line does not count the request again
GET /p/x => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  RateLimit: "u";r=1;t={60-}
  body: a
GET /p/x => 200
  > Authorization: Bearer alice-token
  RateLimit: "u";r=0;t={120-}
GET /p/x => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
  RateLimit: "u";r=0;t={120-}
# addr: 10 units, 3 requests and this one
GET /b.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=6;t={240-}
# /q/ has only an authorized line: the preaccess phase decides in @counted,
# where a request rejected in /q/ never gets
GET /q/x => 200
  > Authorization: Bearer bob-token
  RateLimit: "u";r=1;t={60-}
  body: a
GET /q/x => 200
  > Authorization: Bearer bob-token
  RateLimit: "u";r=0;t={120-}
GET /q/x => 429
  > Authorization: Bearer bob-token
  X-Status: REJECTED
# addr: 4 before, bob's 2 admitted requests and this one
GET /b.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=3;t={420-}



=== TEST 13: dry run in the authorized phase: all pass, REJECTED_DRY_RUN after the burst
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
})
--- config eval
main::behind_auth(q{
location / {
    throttle_dry_run on;
    throttle zone=u phase=authorized;
}
})
--- requests
GET /a.txt => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
  RateLimit: "u";r=1;t={60-}
GET /a.txt => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
GET /a.txt x2 => 200
  > Authorization: Bearer alice-token
  X-Status: REJECTED_DRY_RUN
  RateLimit: "u";r=0;t={120-}
  no Retry-After
  body: a
--- error_log
(dry run)



=== TEST 14: subrequests are not limited: SSI includes, and the auth subrequest's own location with lines of both phases
--- http_config eval
main::auth_backend(q{
throttle_zone k zone=included:1m rate=1r/m burst=0;
throttle_zone k zone=auth_pre:1m rate=1r/m burst=0;
throttle_zone k zone=auth_authorized:1m rate=1r/m burst=0;
})
--- user_files
>>> page.html
[<!--# include virtual="/limited/a.txt" -->|<!--# include virtual="/limited/a.txt" -->|<!--# include virtual="/limited/a.txt" -->]
>>> limited/a.txt
sub
--- config eval
main::behind_auth(q{
location = /page.html {
    ssi on;
}
location /limited/ {
    throttle zone=included phase=authorized;
}
# the auth subrequest's zones, each alone, to read their state
location = /a.txt {
    auth_request off;
    throttle zone=auth_pre;
}
location = /b.txt {
    auth_request off;
    throttle zone=auth_authorized phase=authorized;
}
}, q{
    throttle zone=auth_pre;
    throttle zone=auth_authorized phase=authorized;
})
--- requests
# 3 pages of 3 includes, each page behind an auth subrequest: had any of
# them been limited, an include would not say "sub", or auth_request
# would have failed with a 500
GET /page.html x3 => 200
  > Authorization: Bearer alice-token
  no RateLimit
  no X-Status
  body ~ ^\[sub\n\|sub\n\|sub\n\]$
perl: backend_hits_are($name, '/auth', 3, 'one auth subrequest per page')
# and none of the three zones was charged
GET /limited/a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "included";r=0;t={60-}
GET /limited/a.txt => 429
  > Authorization: Bearer alice-token
GET /a.txt => 200
  RateLimit: "auth_pre";r=0;t={60-}
GET /a.txt => 429
GET /b.txt => 200
  RateLimit: "auth_authorized";r=0;t={60-}
GET /b.txt => 429



=== TEST 15: mirror: a request rejected in the authorized phase is not mirrored, the mirror subrequest is not limited
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
throttle_zone k zone=mirror_pre:1m rate=1r/m burst=0;
throttle_zone k zone=mirror_authorized:1m rate=1r/m burst=0;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=u phase=authorized;
    mirror /_mirror;
}
location = /_mirror {
    internal;
    throttle zone=mirror_pre;
    throttle zone=mirror_authorized phase=authorized;
    proxy_pass http://unix:$TEST_NGINX_PREFIX/auth-$TEST_NGINX_PORT.sock:/mirror;
}
})
--- requests
GET /a.txt x2 => 200
  > Authorization: Bearer alice-token
  X-Status: PASSED
GET /a.txt => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
perl: backend_hits_are($name, '/mirror', 2, 'the two admitted requests, each mirrored')
perl: backend_hits_are($name, '/auth', 3, 'the three requests')



=== TEST 16: every algorithm in the authorized phase: exactly burst + 1 pass for a key set by auth_request_set
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=gcra:1m rate=1r/h burst=2;
throttle_zone $uid zone=fw:1m rate=1r/h burst=2 algorithm=fixed_window;
throttle_zone $uid zone=sw:1m rate=1r/h burst=2 algorithm=sliding_window;
throttle_zone $uid zone=sl:1m rate=1r/h burst=2 algorithm=sliding_log;
})
--- config eval
main::behind_auth(q{
location /gcra/ {
    throttle zone=gcra phase=authorized;
    alias $TEST_NGINX_HTML_DIR/;
}
location /fw/ {
    throttle zone=fw phase=authorized;
    alias $TEST_NGINX_HTML_DIR/;
}
location /sw/ {
    throttle zone=sw phase=authorized;
    alias $TEST_NGINX_HTML_DIR/;
}
location /sl/ {
    throttle zone=sl phase=authorized;
    alias $TEST_NGINX_HTML_DIR/;
}
})
--- requests eval
# the window algorithms start a new window on the hour: when it is less
# than 10 s away, wait for it
my $out = "perl: my \$left = 3600 - POSIX::fmod(time, 3600); sleep(\$left + 0.1) if \$left < 10\n";
for my $zone (qw(gcra fw sw sl)) {
    for my $left (2, 1, 0) {
        $out .= "GET /$zone/a.txt => 200\n  > Authorization: Bearer alice-token\n"
              . "  RateLimit ~ ^\"$zone\";r=$left;t=\\d+\$\n";
    }
    $out .= "GET /$zone/a.txt x2 => 429\n  > Authorization: Bearer alice-token\n"
          . "  X-Status: REJECTED\n  RateLimit ~ ^\"$zone\";r=0;\n";
}
$out;



=== TEST 17: inheritance as limit_req: a block with lines of either phase does not inherit the outer block's
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=1;
throttle_zone $uid zone=v:1m rate=1r/m burst=1;
throttle_zone $remote_addr zone=addr:1m rate=1r/m burst=9;
})
--- config eval
main::behind_auth(q{
throttle zone=u phase=authorized;

# its own preaccess line: not the server's authorized one
location = /a.txt {
    throttle zone=addr;
}
# nothing of its own: the server's
location = /b.txt {
}
# its own preaccess line; the nested location has its own authorized one
location /dir/ {
    throttle zone=addr;

    location = /dir/index.html {
        throttle zone=v phase=authorized;
    }
}
})
--- requests
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=9;t={60-}
GET /a.txt x3 => 200
  > Authorization: Bearer alice-token
  RateLimit ~ ^"addr";r=[678];
GET /b.txt x2 => 200
  > Authorization: Bearer alice-token
  RateLimit ~ ^"u";
GET /b.txt => 429
  > Authorization: Bearer alice-token
  X-Status: REJECTED
GET /dir/index.html x2 => 200
  > Authorization: Bearer alice-token
  RateLimit ~ ^"v";
GET /dir/index.html => 429
  > Authorization: Bearer alice-token
  RateLimit ~ ^"v";
# addr: 10 units, the 4 of /a.txt and this one
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "addr";r=5;t={300-}



=== TEST 18: a cost set by auth_request_set: the backend's X-Cost
--- http_config eval
main::auth_backend(q{
throttle_zone $uid zone=u:1m rate=1r/m burst=3;
})
--- config eval
main::behind_auth(q{
location / {
    throttle zone=u cost=$cost phase=authorized;
}
})
--- requests
# carol costs 2
GET /a.txt => 200
  > Authorization: Bearer carol-token
  RateLimit: "u";r=2;t={120-}
GET /a.txt => 200
  > Authorization: Bearer carol-token
  RateLimit: "u";r=0;t={240-}
GET /a.txt => 429
  > Authorization: Bearer carol-token
  X-Status: REJECTED
  Retry-After: {120-}
# alice costs 1
GET /a.txt x3 => 200
  > Authorization: Bearer alice-token
GET /a.txt => 200
  > Authorization: Bearer alice-token
  RateLimit: "u";r=0;t={240-}
GET /a.txt => 429
  > Authorization: Bearer alice-token
  Retry-After: {60-}
