# SPDX-License-Identifier: BSD-2-Clause
# throttle_api with local zones: GET and POST, several checks at once (all
# or nothing), peeks, the RateLimit fields, one budget shared with HTTP
# requests of the same key (and random calls of both kinds decided as one
# funnel), every bad input (400, nothing charged), other methods (405),
# HEAD, escaping of any key into valid JSON, the checks in
# throttle_metrics, the location's settings, and README's Python example
# run against nginx, a location that also limits its callers, and
# subrequests (403). t/redis_api.t does the same in strict and async
# mode.
#
# Rates are slow (1r/m, 1r/d) so that the milliseconds a block takes never
# change an expected count; times are checked within 10 s.

use strict;
use warnings;

use Encode ();
use FindBin;
use File::Temp ();
use JSON::PP ();
use Test::More;

use Processes qw(read_file);
use ThrottleApi qw(json_of api_get api_post answer_is error_is one_funnel);
use ThrottleTest;

# ---------------------------------------------------------------------------
# Helpers (perl steps call them as main::name)

# README.md's Python example, as it is there.
sub readme_python {
    my $readme = read_file("$FindBin::Bin/../README.md");
    my ($code) = $readme =~ /```python\n(.*?def is_action_allowed.*?)```/s
        or die "README.md has no Python is_action_allowed\n";
    return $code;
}

run_blocks();

__DATA__

=== TEST 1: GET charges a key, then refuses it with 429 and Retry-After; the answer's figures are the zone's
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
--- config
location = /throttle {
    throttle_api zones=reply;
}
--- requests
GET /throttle?zone=reply&key=alice => 200
  Content-Type: application/json
  RateLimit-Policy: "reply";q=3;w=180
  RateLimit: "reply";r=2;t=60
  no Retry-After
perl {
    my ($res, $json) = main::api_get("$name: 2nd", 'zone=reply&key=alice');
    main::answer_is("$name: 2nd", $res, $json, 200, 1,
        { zone => 'reply', key => 'alice', status => 'PASSED', limit => 3,
          remaining => 1, reset_after_ms => 120_000, retry_after_ms => -1,
          delay_ms => 0 });
    ($res, $json) = main::api_get("$name: 3rd", 'zone=reply&key=alice&cost=1');
    main::answer_is("$name: 3rd", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 0, reset_after_ms => 180_000,
          retry_after_ms => -1 });
    ($res, $json) = main::api_get("$name: 4th", 'zone=reply&key=alice');
    main::answer_is("$name: 4th", $res, $json, 429, 0,
        { zone => 'reply', key => 'alice', status => 'REJECTED', limit => 3,
          remaining => 0, reset_after_ms => 180_000,
          retry_after_ms => 60_000, delay_ms => 0 });
    like(header($res, 'Retry-After'), qr/^(5\d|60)$/, "$name: Retry-After");
    is(header($res, 'RateLimit'), '"reply";r=0;t=180', "$name: RateLimit");
    ($res, $json) = main::api_get("$name: bob", 'zone=reply&key=bob');
    main::answer_is("$name: bob", $res, $json, 200, 1,
        { key => 'bob', remaining => 2 });
}
--- error_log
~ \[error\] .*throttled by zone "reply", retry after



=== TEST 2: POST, one check or several: all must pass, a rejected set is charged to none, answers in the caller's order
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
throttle_zone $http_x_user_id zone=day:1m rate=1r/d burst=1;
--- config
location = /throttle {
    throttle_api zones=reply,day;
}
--- requests
perl {
    my $both = { checks => [ { zone => 'reply', key => 'alice' },
                             { zone => 'day', key => 'alice', cost => 1 } ] };
    my ($res, $json) = main::api_post("$name: 1st", $both);
    main::answer_is("$name: 1st", $res, $json, 200, 1,
        { zone => 'reply', status => 'PASSED', remaining => 2 },
        { zone => 'day', status => 'PASSED', remaining => 1,
          reset_after_ms => 86_400_000 });
    # the binding zone is the one with the fewest units left
    is(header($res, 'RateLimit'), '"day";r=1;t=86400', "$name: 1st: RateLimit");
    ($res, $json) = main::api_post("$name: 2nd", $both);
    main::answer_is("$name: 2nd", $res, $json, 200, 1,
        { zone => 'reply', remaining => 1 }, { zone => 'day', remaining => 0 });
    ($res, $json) = main::api_post("$name: 3rd", $both);
    main::answer_is("$name: 3rd (day refuses)", $res, $json, 429, 0,
        { zone => 'reply', status => 'PASSED', remaining => 0,
          retry_after_ms => -1 },
        { zone => 'day', status => 'REJECTED', remaining => 0,
          retry_after_ms => 86_400_000 });
    like(header($res, 'Retry-After'), qr/^86[34]\d\d$/, "$name: Retry-After");
    is(header($res, 'RateLimit'), '"day";r=0;t=172800', "$name: RateLimit");
    # reply was charged twice, not three times
    ($res, $json) = main::api_post("$name: peek",
                                   '{"zone":"reply","key":"alice","cost":0}');
    main::answer_is("$name: peek", $res, $json, 200, 1,
        { zone => 'reply', status => 'PASSED', remaining => 1,
          retry_after_ms => -1 });
    # one check alone, cost 2
    ($res, $json) = main::api_post("$name: bob",
                                   '{"zone":"reply","key":"bob","cost":2}');
    main::answer_is("$name: bob", $res, $json, 200, 1,
        { zone => 'reply', key => 'bob', remaining => 1 });
    # a cost that can never fit: no Retry-After, retry_after_ms -1
    ($res, $json) = main::api_post("$name: too costly",
                                   '{"zone":"reply","key":"carol","cost":4}');
    main::answer_is("$name: too costly", $res, $json, 429, 0,
        { status => 'REJECTED', limit => 3, remaining => 3,
          retry_after_ms => -1 });
    ok(!defined header($res, 'Retry-After'), "$name: too costly: no Retry-After");
}



=== TEST 3: cost=0 peeks without charging, GET and POST; HEAD is a GET without a body and charges
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
--- config
location = /throttle {
    throttle_api zones=reply;
}
--- requests
GET /throttle?zone=reply&key=alice&cost=0 x3 => 200
  RateLimit: "reply";r=3;t=0
  body ~ "remaining":3,
GET /throttle?zone=reply&key=alice&cost=2 => 200
  body ~ "remaining":1,
# the GET's answer has a reservation, whose length depends on the clock
HEAD /throttle?zone=reply&key=alice => 200
  Content-Type: application/json
  Content-Length ~ ^(18\d|19\d|20\d)$
  RateLimit: "reply";r=0;t=180
  body:
GET /throttle?zone=reply&key=alice&cost=0 => 200
  Content-Length: 157
  RateLimit: "reply";r=0;t={180-}
  body ~ ^\{"allowed":true,"checks":\[\{"zone":"reply","key":"alice","status":"PASSED","limit":3,"remaining":0,"reset_after_ms":1\d{5},"retry_after_ms":-1,"delay_ms":0\}\]\}$
POST /throttle => 200
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":0}
  body ~ "remaining":0,
GET /throttle?zone=reply&key=alice => 429
HEAD /throttle?zone=reply&key=alice => 429
  Retry-After ~ ^(5\d|60)$
  body:



=== TEST 4: one budget: a zone keyed on a header counts the HTTP requests and the API checks of the same key together
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=4;
--- config
location / {
    throttle zone=reply;
}
location = /throttle {
    throttle_api zones=reply;
}
--- requests
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=4;t=60
GET /throttle?zone=reply&key=alice => 200
  RateLimit: "reply";r=3;t={120-}
GET /a.txt => 200
  > X-User-Id: alice
  RateLimit: "reply";r=2;t={180-}
GET /throttle?zone=reply&key=alice&cost=2 => 200
  RateLimit: "reply";r=0;t={300-}
GET /a.txt => 429
  > X-User-Id: alice
GET /throttle?zone=reply&key=alice => 429
# the query string is URL-decoded as forms encode it: "alice smith"
GET /throttle?zone=reply&key=alice+smith&cost=5 => 200
  RateLimit: "reply";r=0;t=300
GET /a.txt => 429
  > X-User-Id: alice smith
GET /throttle?zone=reply&key=bob%2Fx%3D1 => 200
GET /a.txt => 200
  > X-User-Id: bob/x=1
  RateLimit: "reply";r=3;t={120-}
perl {
    # keys longer than 255 bytes are kept as their digest: the same one
    my $long = 'k' x 300;
    my ($res) = main::api_get("$name: long", "zone=reply&key=$long&cost=4");
    is($res->{status}, 200, "$name: a 300-byte key, 4 units");
    $res = request('GET /a.txt', 'X-User-Id' => $long);
    is($res->{status}, 200, "$name: ... its HTTP request passes");
    is(header($res, 'RateLimit'), '"reply";r=0;t=300',
       "$name: ... and takes the last unit");
    $res = request('GET /a.txt', 'X-User-Id' => $long);
    is($res->{status}, 429, "$name: ... the next is refused");
    # and POST keys too
    ($res) = main::api_post("$name: post", { zone => 'reply',
                                              key => 'bob/x=1', cost => 3 });
    is($res->{status}, 200, "$name: POST takes bob/x=1's last 3 units");
    is(request('GET /a.txt', 'X-User-Id' => 'bob/x=1')->{status}, 429,
       "$name: ... his request is refused");
}



=== TEST 5: random HTTP requests and API calls of one key are decided as one funnel
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/h burst=39;
throttle_zone $http_x_user_id zone=wide:1m rate=1r/h burst=1000;
--- config
location / {
    throttle zone=reply cost=$http_x_cost;
}
location = /throttle {
    throttle_api zones=reply,wide;
}
--- requests
perl: main::one_funnel($name, 'alice', 40, 80);



=== TEST 6: every bad input is refused with 400 and {"error":...}, and charges nothing
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
throttle_zone $http_x_user_id zone=day:1m rate=1r/d burst=1;
throttle_zone $http_x_user_id zone=other:1m rate=1r/m;
--- config
location = /throttle {
    throttle_api zones=reply,day;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /throttle => 400
  Content-Type: application/json
  no RateLimit
  body: {"error":"missing \"zone\""}
GET /throttle?key=alice => 400
  body: {"error":"missing \"zone\""}
GET /throttle?zone=nope&key=alice => 400
  body: {"error":"unknown zone \"nope\": not one of this endpoint's zones="}
GET /throttle?zone=other&key=alice => 400
  body: {"error":"unknown zone \"other\": not one of this endpoint's zones="}
GET /throttle?zone=reply => 400
  body: {"error":"missing \"key\""}
GET /throttle?zone=reply&key= => 400
  body: {"error":"\"key\" is empty"}
GET /throttle?zone=reply&key => 400
  body: {"error":"\"key\" is empty"}
GET /throttle?zone=reply&key=alice&cost=-1 => 400
  body: {"error":"cost \"-1\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=reply&key=alice&cost=1.5 => 400
  body: {"error":"cost \"1.5\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=reply&key=alice&cost= => 400
  body: {"error":"cost \"\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=reply&key=alice&cost=1000000001 => 400
  body: {"error":"cost \"1000000001\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=reply&key=alice&cost=99999999999999999999 => 400
  body: {"error":"cost \"99999999999999999999\" is not an integer from 0 to 1000000000"}
GET /throttle?zone=reply&key=alice&x=1 => 400
  body: {"error":"unknown parameter \"x\""}
GET /throttle?zone=reply&key=alice&key=bob => 400
  body: {"error":"parameter \"key\" is repeated"}
GET /throttle?zone=reply&key=al%2 => 400
  body: {"error":"parameter \"key\" has a '%' not followed by two hex digits"}
GET /throttle?zone=reply&key=al%zzice => 400
  body: {"error":"parameter \"key\" has a '%' not followed by two hex digits"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply"}
  body: {"error":"missing \"key\""}
POST /throttle => 400
  > Content-Type: application/json
  >> {"key":"alice"}
  body: {"error":"missing \"zone\""}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":""}
  body: {"error":"\"key\" is empty"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":7}
  body: {"error":"\"key\" must be a string"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":["reply"],"key":"alice"}
  body: {"error":"\"zone\" must be a string"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":-1}
  body: {"error":"\"cost\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":1.0}
  body: {"error":"\"cost\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":"1"}
  body: {"error":"\"cost\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","cost":1000000001}
  body: {"error":"\"cost\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","user":"alice"}
  body: {"error":"unknown field \"user\""}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice","key":"bob"}
  body: {"error":"field \"key\" is repeated"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice"
  body: {"error":"malformed JSON at byte 29: Missing a comma or '}' after an object member."}
POST /throttle => 400
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice"} {}
  body: {"error":"malformed JSON at byte 31: The document root must not be followed by other values."}
POST /throttle => 400
  > Content-Type: application/json
  body: {"error":"malformed JSON at byte 0: The document is empty."}
POST /throttle => 400
  > Content-Type: application/json
  >> ["reply","alice"]
  body: {"error":"the body must be a JSON object"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[]}
  body: {"error":"\"checks\" must be an array of one check or more"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":{"zone":"reply","key":"alice"}}
  body: {"error":"\"checks\" must be an array of one check or more"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":["reply"]}
  body: {"error":"a check must be an object"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"reply","key":"alice"}],"key":"bob"}
  body: {"error":"\"checks\" comes alone: the fields of a check go in it"}
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"reply","key":"alice"},{"zone":"reply","key":"bob"}]}
  body: {"error":"zone \"reply\" is asked twice"}
# a bad check refuses the whole set, the good ones before it too
POST /throttle => 400
  > Content-Type: application/json
  >> {"checks":[{"zone":"reply","key":"alice"},{"zone":"day","key":"alice","cost":-2}]}
  body: {"error":"\"cost\" is not an integer from 0 to 1000000000"}
POST /throttle => 400
  > Content-Type: text/plain
  >> {"zone":"reply","key":"alice"}
  body: {"error":"Content-Type must be application/json"}
POST /throttle => 400
  >> {"zone":"reply","key":"alice"}
  body: {"error":"Content-Type must be application/json"}
POST /throttle => 400
  > Content-Type: application/jsonx
  >> {"zone":"reply","key":"alice"}
  body: {"error":"Content-Type must be application/json"}
perl {
    my $key = 'k' x 4097;
    my ($res) = main::api_get("$name: long key", "zone=reply&key=$key");
    main::error_is("$name: a 4097-byte key", $res, 400,
                   '"key" is longer than 4096 bytes');
    ($res) = main::api_post("$name: long key",
                            { zone => 'reply', key => $key });
    main::error_is("$name: a 4097-byte key in JSON", $res, 400,
                   '"key" is longer than 4096 bytes');
    my $checks = { checks => [ map { { zone => 'reply', key => "k$_" } }
                               1 .. 17 ] };
    ($res) = main::api_post("$name: 17 checks", $checks);
    main::error_is("$name: 17 checks", $res, 400, 'more than 16 checks');
    my $body = '{"zone":"reply","key":"alice"}' . (' ' x 16_355);
    is(length $body, 16_385, "$name: a body of 16385 bytes");
    ($res) = main::api_post("$name: too long", $body);
    main::error_is("$name: a body over 16 KiB", $res, 400,
                   'the body is longer than 16384 bytes');
    # a chunked body's length is known once it is read
    my $chunked = sprintf("%x\r\n%s\r\n0\r\n\r\n", length $body, $body);
    ($res) = main::api_post("$name: chunked", $chunked,
                            'Transfer-Encoding' => 'chunked');
    main::error_is("$name: a chunked body over 16 KiB", $res, 400,
                   'the body is longer than 16384 bytes');
    # the JSON text must be UTF-8, and one value
    ($res) = main::api_post("$name: latin-1", qq({"zone":"reply","key":"\xe9"}));
    main::error_is("$name: a body that is not UTF-8", $res, 400,
                   'malformed JSON at byte 23: Invalid encoding in string.');
    # a deep nesting costs no stack (nor a crash: the block checks)
    ($res) = main::api_post("$name: deep", '[' x 8000 . ']' x 8000);
    main::error_is("$name: 8000 nested arrays", $res, 400,
                   'the body must be a JSON object');

    # nothing was charged, nor counted
    my ($peek, $json) = main::api_get("$name: peek", 'zone=reply&key=alice&cost=0');
    main::answer_is("$name: peek", $peek, $json, 200, 1, { remaining => 3 });
    ($peek, $json) = main::api_get("$name: peek", 'zone=day&key=alice&cost=0');
    main::answer_is("$name: peek", $peek, $json, 200, 1, { remaining => 2 });
    my $m = metrics();
    is($m->{'nginx_throttle_requests_total{zone="reply",result="passed"}'}, 1,
       "$name: reply counted the peek alone");
    is($m->{'nginx_throttle_units_total{zone="reply",result="passed"}'}, 0,
       "$name: ... and charged no unit");
    is($m->{'nginx_throttle_requests_total{zone="day",result="passed"}'}, 1,
       "$name: day counted its peek alone");
}



=== TEST 7: other methods get 405 with Allow and a JSON error, their body discarded; a POST body in a temporary file is read
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
--- config
location = /throttle {
    throttle_api zones=reply;
    client_body_buffer_size 1k;
}
--- requests
PUT /throttle => 405
  Allow: GET, HEAD, POST
  Content-Type: application/json
  body: {"error":"method not allowed: use GET, HEAD or POST"}
DELETE /throttle?zone=reply&key=alice => 405
  Allow: GET, HEAD, POST
OPTIONS /throttle => 405
  Allow: GET, HEAD, POST
keepalive {
PUT /throttle => 405
  > Content-Type: application/json
  >> {"zone":"reply","key":"alice"}
GET /throttle?zone=reply&key=alice&cost=0 => 200
  body ~ "remaining":3,
}
perl {
    # 3 KiB of JSON: nginx keeps what exceeds 1k in a temporary file
    my $body = '{"zone":"reply","key":"' . ('x' x 3000) . '","cost":2}';
    my ($res, $json) = main::api_post("$name: file", $body);
    main::answer_is("$name: a 3 KiB body", $res, $json, 200, 1,
        { key => 'x' x 3000, remaining => 1 });
    # and a body of exactly 16384 bytes, chunked
    $body = '{"zone":"reply","key":"y"}';
    $body .= ' ' x (16_384 - length $body);
    my $chunked = join '', map { sprintf("%x\r\n%s\r\n", length, $_) }
                               unpack('(a4000)*', $body);
    ($res, $json) = main::api_post("$name: 16 KiB", "${chunked}0\r\n\r\n",
                                   'Transfer-Encoding' => 'chunked');
    main::answer_is("$name: a chunked body of 16384 bytes", $res, $json, 200,
                    1, { key => 'y', remaining => 2 });
}
--- error_log
a client request body is buffered to a temporary file



=== TEST 8: any key comes back as valid JSON: quotes, backslashes, control bytes escaped, invalid UTF-8 bytes as U+FFFD
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
--- config
location = /throttle {
    throttle_api zones=reply;
}
--- requests
perl {
    # bytes: a"b\c, NUL, 0x01, 0x1f, DEL, 0xff, é (valid), a cut 3-byte
    # sequence (e2 82) then z, a surrogate (ed a0 80), 😀 (valid)
    my $bytes = qq(a"b\\c\x00\x01\x1f\x7f\xff\xc3\xa9\xe2\x82z\xed\xa0\x80)
              . "\xf0\x9f\x98\x80";
    my $want = qq(a"b\\c\x00\x01\x1f\x7f\x{fffd}\x{e9}\x{fffd}\x{fffd}z)
             . "\x{fffd}\x{fffd}\x{fffd}\x{1f600}";
    (my $query = $bytes) =~ s/([^A-Za-z0-9])/sprintf('%%%02X', ord $1)/ge;
    my ($res, $json) = main::api_get("$name: GET", "zone=reply&key=$query");
    is($res->{status}, 200, "$name: GET: 200");
    is($json && $json->{checks}[0]{key}, $want, "$name: GET: the key, each invalid byte U+FFFD");
    like($res->{body}, qr/"key":"a\\"b\\\\c\\u0000\\u0001\\u001F\x7f\xef\xbf\xbd/,
         "$name: GET: quotes, backslashes and control bytes escaped");
    ok(eval { Encode::decode('UTF-8', $res->{body}, Encode::FB_CROAK); 1 },
       "$name: GET: the body is UTF-8") or diag($@);
    # the same bytes are one key: a second charge on it
    ($res, $json) = main::api_get("$name: again", "zone=reply&key=$query");
    is($json && $json->{checks}[0]{remaining}, 1, "$name: the same key again");
    # a JSON string's escapes are decoded
    ($res, $json) = main::api_post("$name: POST",
        qq({"zone":"reply","key":"a\\"b\\\\c\\u0000\\u0001\\u001f\x7f"}));
    is($json && $json->{checks}[0]{key}, qq(a"b\\c\x00\x01\x1f\x7f),
       "$name: POST: escapes decoded and written back");
    # an error quoting a caller's value is valid JSON too
    ($res, $json) = main::api_get("$name: zone", 'zone=%22%FF%00&key=a');
    is($json && $json->{error},
       qq(unknown zone "\"\x{fffd}\x00": not one of this endpoint's zones=),
       "$name: an unknown zone quoted, escaped");
    # a quoted value is cut at 64 bytes
    ($res, $json) = main::api_get("$name: long zone", 'zone=' . ('z' x 100) . '&key=a');
    is($json && $json->{error},
       'unknown zone "' . ('z' x 64) . '": not one of this endpoint\'s zones=',
       "$name: a long zone name is cut at 64 bytes");
}



=== TEST 9: nginx_throttle_requests_total and units_total count API checks as requests, with HTTP requests of the zone
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=2;
throttle_zone $http_x_user_id zone=day:1m rate=1r/d;
--- config
location / {
    throttle zone=reply;
}
location = /throttle {
    throttle_api zones=reply,day;
}
location = /metrics {
    throttle_metrics;
}
--- requests
GET /a.txt => 200
  > X-User-Id: alice
GET /throttle?zone=reply&key=alice&cost=2 => 200
GET /throttle?zone=reply&key=alice => 429
POST /throttle => 200
  > Content-Type: application/json
  >> {"checks":[{"zone":"reply","key":"bob"},{"zone":"day","key":"bob"}]}
# day refuses: reply's verdict is PASSED, and it charges nothing
POST /throttle => 429
  > Content-Type: application/json
  >> {"checks":[{"zone":"reply","key":"bob","cost":2},{"zone":"day","key":"bob","cost":1}]}
perl {
    my $m = metrics();
    my %want = (
        'requests_total{zone="reply",result="passed"}'   => 4,
        'requests_total{zone="reply",result="rejected"}' => 1,
        'units_total{zone="reply",result="passed"}'      => 4,
        'units_total{zone="reply",result="rejected"}'    => 1,
        'requests_total{zone="day",result="passed"}'     => 1,
        'requests_total{zone="day",result="rejected"}'   => 1,
        'units_total{zone="day",result="passed"}'        => 1,
        'units_total{zone="day",result="rejected"}'      => 1,
    );
    for my $series (sort keys %want) {
        is($m->{"nginx_throttle_$series"}, $want{$series}, "$name: $series");
    }
}



=== TEST 10: the location's settings: throttle_status, throttle_headers, throttle_dry_run, throttle_log_level
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m;
--- config
location = /throttle {
    throttle_api zones=reply;
    throttle_status 503;
    throttle_headers legacy;
    throttle_log_level warn;
}
location = /dry {
    throttle_api zones=reply;
    throttle_dry_run on;
    throttle_headers off;
}
--- requests
GET /throttle?zone=reply&key=alice => 200
  X-RateLimit-Limit: 1
  X-RateLimit-Remaining: 0
  no RateLimit
GET /throttle?zone=reply&key=alice => 503
  Retry-After ~ ^(5\d|60)$
  body ~ ^\{"allowed":false,.*"status":"REJECTED"
GET /dry?zone=reply&key=alice => 200
  no RateLimit
  no Retry-After
  body ~ ^\{"allowed":true,.*"status":"REJECTED_DRY_RUN","limit":1,"remaining":0,"reset_after_ms":\d+,"retry_after_ms":[1-6]\d{4},
--- error_log
~ \[warn\] .*throttled by zone "reply", retry after
~ \[error\] .*throttled by zone "reply" \(dry run\), retry after



=== TEST 11: zones= names zones declared anywhere in http{}, before or after the location
--- http_config
throttle_zone $http_x_user_id zone=earlier:1m rate=1r/m burst=1;
# the first server named localhost on the port: the block's own one is
# ignored (with a warning)
server {
    listen 127.0.0.1:$TEST_NGINX_PORT;
    server_name localhost;
    location = /throttle {
        throttle_api zones=later,earlier;
    }
}
throttle_zone $http_x_user_id zone=later:1m rate=1r/m;
--- requests
GET /throttle?zone=later&key=alice => 200
  body ~ "limit":1,
GET /throttle?zone=later&key=alice => 429
GET /throttle?zone=earlier&key=alice => 200
  body ~ "limit":2,



=== TEST 12: README's Python is_action_allowed(), run against nginx: 5 actions a minute, shared with the user's requests
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=5r/m algorithm=sliding_log;
--- config
location / {
    throttle zone=reply;
}
location = /throttle {
    throttle_api zones=reply;
}
--- requests
perl {
    SKIP: {
        skip 'python3 is not installed', 4
            unless grep { -x "$_/python3" } split /:/, $ENV{PATH};
        my $script = File::Temp->new(SUFFIX => '.py');
        print $script main::readme_python(), <<"EOF";

THROTTLE = "http://127.0.0.1:$nginx->{port}/throttle"
print(*[is_action_allowed("alice", "reply") for _ in range(6)])
print(is_action_allowed("alice smith", "reply"))
try:
    is_action_allowed("alice", "nope")
except urllib.error.HTTPError as refused:
    print(refused.code, json.load(refused)["error"])
EOF
        close $script;
        my $out = `python3 $script 2>&1`;
        is($?, 0, "$name: the example runs") or diag($out);
        is($out, "True True True True True False\nTrue\n"
               . "400 unknown zone \"nope\": not one of this endpoint's zones=\n",
           "$name: 5 pass, the 6th is refused; another user has his own; a bad zone raises");
        is(request('GET /a.txt', 'X-User-Id' => 'alice')->{status}, 429,
           "$name: alice's HTTP request is refused too");
        is(request('GET /a.txt', 'X-User-Id' => 'alice smith')->{status}, 200,
           "$name: 'alice smith' has 4 left");
    }
}



=== TEST 13: a throttle_api location's own throttle lines limit its callers first
--- http_config
throttle_zone $remote_addr zone=callers:1m rate=1r/m burst=1;
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m burst=4;
--- config
location = /throttle {
    throttle zone=callers;
    throttle_api zones=reply;
}
--- requests
GET /throttle?zone=reply&key=alice => 200
  RateLimit: "reply";r=4;t=60
GET /throttle?zone=reply&key=alice => 200
  RateLimit: "reply";r=3;t={120-}
GET /throttle?zone=reply&key=alice => 429
  Content-Type: text/html
  RateLimit: "callers";r=0;t={120-}



=== TEST 14: a subrequest is not answered: 403
--- user_files
>>> ssi.html
[<!--# include virtual="/throttle?zone=reply&key=alice" -->]
--- http_config
throttle_zone $http_x_user_id zone=reply:1m rate=1r/m;
--- config
location = /ssi.html {
    ssi on;
}
location = /throttle {
    throttle_api zones=reply;
}
--- requests
GET /ssi.html => 200
  body ~ ^\[<html>\s*<head><title>403 Forbidden
GET /throttle?zone=reply&key=alice => 200
  body ~ "remaining":0,



=== TEST 15: delay= asks how long to wait before acting: delay_ms and DELAYED by limit_req's rule, in GET and POST; a zone that cannot delay, and bad values, are refused
--- http_config
throttle_zone $http_x_user_id zone=post:1m rate=1r/m burst=5;
throttle_zone $http_x_user_id zone=win:1m rate=1r/m algorithm=fixed_window;
--- config
location = /throttle {
    throttle_api zones=post,win;
}
--- requests
GET /throttle?zone=post&key=bob&delay=1 => 200
perl {
    # T = 60 s, delay=1: two units ahead of a request go at once, each
    # further one waits a T more; beyond burst + 1 = 6 units, rejected
    my ($res, $json) = main::api_get("$name: 2nd", 'zone=post&key=alice&delay=1');
    main::answer_is("$name: 2nd", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 5, delay_ms => 0 });
    ($res, $json) = main::api_get("$name: 3rd", 'zone=post&key=alice&delay=1');
    main::answer_is("$name: 3rd", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 4, delay_ms => 0 });
    ($res, $json) = main::api_get("$name: 4th", 'zone=post&key=alice&delay=1');
    main::answer_is("$name: 4th", $res, $json, 200, 1,
        { status => 'DELAYED', remaining => 3, delay_ms => 60_000,
          retry_after_ms => -1 });
    ($res, $json) = main::api_post("$name: 5th, cost 2",
        { zone => 'post', key => 'alice', cost => 2, delay => 1 });
    main::answer_is("$name: 5th, cost 2", $res, $json, 200, 1,
        { status => 'DELAYED', remaining => 1, delay_ms => 120_000 });
    ($res, $json) = main::api_get("$name: 6th, over", 'zone=post&key=alice&delay=1&cost=2');
    main::answer_is("$name: 6th, over", $res, $json, 429, 0,
        { status => 'REJECTED', remaining => 1, delay_ms => 0 });
    # the same key without delay= is not held back: PASSED
    ($res, $json) = main::api_get("$name: no delay=", 'zone=post&key=alice');
    main::answer_is("$name: no delay=", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 0, delay_ms => 0 });
    # refusals charge nothing
    for my $bad (['zone=win&key=alice&delay=1',
                  qr/^"delay": zone "win" has "algorithm=fixed_window", which cannot space requests out: .*"delay=" needs "algorithm=gcra"$/],
                 ['zone=post&key=carol&delay=abc',
                  qr/^delay "abc" is not an integer from 0 to \d+$/],
                 ['zone=post&key=carol&delay=-1',
                  qr/^delay "-1" is not an integer from 0 to \d+$/]) {
        my ($r, $j) = main::api_get("$name: $bad->[0]", $bad->[0]);
        is($r->{status}, 400, "$name: $bad->[0]: 400");
        like($j->{error} // '', $bad->[1], "$name: $bad->[0]: why");
    }
    my ($r, $j) = main::api_post("$name: JSON delay -1",
        { zone => 'post', key => 'carol', delay => -1 });
    is($r->{status}, 400, "$name: JSON delay -1: 400");
    like($j->{error} // '', qr/^"delay" is not an integer from 0 to \d+$/,
         "$name: JSON delay -1: why");
    ($res, $json) = main::api_get("$name: carol untouched", 'zone=post&key=carol&cost=0');
    main::answer_is("$name: carol untouched", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 6 });
    ($res, $json) = main::api_get("$name: win untouched", 'zone=win&key=alice&cost=0');
    main::answer_is("$name: win untouched", $res, $json, 200, 1,
        { status => 'PASSED', remaining => 1 });
}
