# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Http;

# A small HTTP/1.1 client for the tests, over raw loopback sockets so that
# every byte and every header is what nginx sent: one request per
# connection, several on one keep-alive connection, or N connections
# written at once. Every wait is bounded by $Processes::TIMEOUT.
#
# A request is { method, uri, send => [[name, value], ...], body }; a
# body is sent with its Content-Length, unless the request's own headers
# say how it is framed (Content-Length or Transfer-Encoding). A response is
# { status, headers => { lc name => [values] }, body, closed, error,
# elapsed }, with {error} set when it could not be read whole.

use strict;
use warnings;

use Exporter 'import';
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time);
use Processes qw($TIMEOUT);

our @EXPORT_OK = qw(connect_to http_exchange http_read one_request
                    exchange_parallel http_request http_parallel
                    dump_response);

# A connection to the nginx of $env, or undef ($! says why).
sub connect_to {
    my ($env) = @_;
    return IO::Socket::INET->new(
        PeerAddr => '127.0.0.1',
        PeerPort => $env->{port},
        Proto    => 'tcp',
        Timeout  => $TIMEOUT,
    );
}

# A response that never came.
sub no_response {
    my ($error) = @_;
    return { headers => {}, body => '', error => $error };
}

# The bytes of a request; Connection: keep-alive or close.
sub request_text {
    my ($req, $keepalive) = @_;
    my $body = $req->{body};
    my $msg = "$req->{method} $req->{uri} HTTP/1.1\r\nHost: localhost\r\n"
            . 'Connection: ' . ($keepalive ? 'keep-alive' : 'close') . "\r\n";
    $msg .= "$_->[0]: $_->[1]\r\n" for @{ $req->{send} };
    $msg .= 'Content-Length: ' . length($body) . "\r\n"
        if defined $body
        && !grep { $_->[0] =~ /^(content-length|transfer-encoding)$/i }
                @{ $req->{send} };
    return "$msg\r\n" . ($body // '');
}

# Sends one request and reads its response, every read bounded by
# $TIMEOUT.
sub http_exchange {
    my ($sock, $req, $keepalive) = @_;
    my $msg = request_text($req, $keepalive);

    my $sel = IO::Select->new($sock);
    my $deadline = time + $TIMEOUT;
    my $off = 0;
    while ($off < length $msg) {
        my $left = $deadline - time;
        return no_response('timeout writing the request')
            unless $left > 0 && $sel->can_write($left);
        my $w = syswrite $sock, $msg, length($msg) - $off, $off;
        return no_response("write: $!") unless defined $w;
        $off += $w;
    }

    return http_read($sock, $req);
}

# Reads one response, $TIMEOUT for the whole of it.
sub http_read {
    my ($sock, $req) = @_;
    my $res = { headers => {}, body => '' };
    my $sel = IO::Select->new($sock);
    my $deadline = time + $TIMEOUT;
    my $left = sub { my $l = $deadline - time; $l > 0 ? $l : 0 };

    my $buf = '';
    my $eof = 0;
    my $read = sub {    # more bytes into $buf; false at EOF or error
        return 0 if $eof;
        unless ($sel->can_read($left->())) {
            $res->{error} = "timeout (${TIMEOUT}s) reading the response";
            return 0;
        }
        my $r = sysread $sock, $buf, 65536, length $buf;
        if (!defined $r) { $res->{error} = "read: $!"; return 0 }
        if ($r == 0) { $eof = 1; return 0 }
        return 1;
    };

    while ($buf !~ /\r\n\r\n/) {
        unless ($read->()) {
            $res->{error} //= 'connection closed before the response header'
                              . ($buf eq '' ? '' : ": $buf");
            return $res;
        }
    }

    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my ($status_line, @lines) = split /\r\n/, $head;
    unless ($status_line =~ m{^HTTP/1\.[01] (\d{3})}) {
        $res->{error} = "bad status line: $status_line";
        return $res;
    }
    $res->{status} = $1;
    for my $l (@lines) {
        my ($k, $v) = $l =~ /^([^:]+):\s*(.*?)\s*$/ or next;
        push @{ $res->{headers}{ lc $k } }, $v;
    }
    $buf = $rest;

    my $h = $res->{headers};
    my $no_body = $req->{method} eq 'HEAD' || $res->{status} =~ /^(1..|204|304)$/;

    if ($no_body) {
        # nothing
    } elsif (($h->{'transfer-encoding'}[0] // '') =~ /chunked/i) {
        my $body = '';
        while (1) {
            while ($buf !~ /\r\n/) {
                unless ($read->()) {
                    $res->{error} //= 'connection closed in a chunked body';
                    return $res;
                }
            }
            $buf =~ s/^([0-9a-fA-F]+)[^\r]*\r\n// or do {
                $res->{error} = 'bad chunk';
                return $res;
            };
            my $len = hex $1;
            while (length($buf) < $len + 2) {
                unless ($read->()) {
                    $res->{error} //= 'connection closed in a chunk';
                    return $res;
                }
            }
            $body .= substr($buf, 0, $len);
            substr($buf, 0, $len + 2) = '';
            if ($len == 0) {
                last;
            }
        }
        $res->{body} = $body;
    } elsif (defined $h->{'content-length'}) {
        my $len = $h->{'content-length'}[0];
        while (length($buf) < $len) {
            unless ($read->()) {
                $res->{error} //= 'connection closed in the body';
                return $res;
            }
        }
        $res->{body} = substr($buf, 0, $len);
    } else {
        1 while $read->();
        $res->{body} = $buf;
        $res->{closed} = 1;
    }

    my $conn = lc($h->{connection}[0] // '');
    $res->{closed} = 1 if $conn eq 'close';
    return $res;
}

# Waits, at most $TIMEOUT, until nginx closes $sock. nginx runs a
# request's log phase (access log lines, settle=, the end of a flight)
# before it closes a Connection: close connection, so a client that waits
# for the close sees that work done before its next request; without the
# wait, a worker held off the CPU after its last byte could log after the
# next request's worker did.
sub wait_for_close {
    my ($sock) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = time + $TIMEOUT;
    while ((my $left = $deadline - time) > 0) {
        last unless $sel->can_read($left);
        my $r = sysread $sock, my $ignored, 65536;
        last unless $r;    # EOF, or an error such as a reset
    }
}

# One request on its own connection, waiting for nginx to close it; the
# response has {elapsed} (seconds, connect to last byte).
sub one_request {
    my ($env, $req) = @_;
    my $t0 = time;
    my $sock = connect_to($env)
        or return { %{ no_response("connect to 127.0.0.1:$env->{port}: $!") },
                    elapsed => time - $t0 };
    my $res = http_exchange($sock, $req, 0);
    $res->{elapsed} = time - $t0;
    wait_for_close($sock) unless $res->{error};
    close $sock;
    return $res;
}

# N connections opened, the request written on each at once, then the N
# responses read (each read bounded), so that the workers decide them
# concurrently; each response has {elapsed} since the writes.
sub exchange_parallel {
    my ($env, $count, $req) = @_;
    my $msg = request_text($req, 0);
    my @socks = map { connect_to($env) } 1 .. $count;
    my $t0 = time;
    for my $s (grep { $_ } @socks) {
        syswrite $s, $msg;
    }
    my @res;
    for my $s (@socks) {
        unless ($s) {
            push @res, no_response('connect');
            next;
        }
        my $r = http_read($s, $req);
        $r->{elapsed} = time - $t0;
        close $s;
        push @res, $r;
    }
    return @res;
}

# A request from 'METHOD /uri' (GET when no method is given) and header
# name => value pairs, then, as a reference to a string, the body if it
# has one; dies with $caller's name when $what does not parse.
sub parse_request {
    my ($caller, $what, @headers) = @_;
    my ($method, $uri) = $what =~ m{^(?:([A-Z]+)\s+)?(/\S*)$}
        or die "$caller: cannot parse \"$what\"\n";
    my $body = @headers && ref $headers[-1] eq 'SCALAR' ? ${ pop @headers }
                                                         : undef;
    my @send;
    push @send, [splice @headers, 0, 2] while @headers;
    return { method => $method // 'GET', uri => $uri, send => \@send,
             body => $body };
}

# An HTTP request to an nginx of this runner: http_request($env, 'GET /u',
# Name => value, ...), on a connection of its own.
sub http_request {
    my ($env, $what, @headers) = @_;
    return one_request($env, parse_request('http_request', $what, @headers));
}

# http_parallel($env, N, 'GET /u', Name => value, ...): exchange_parallel.
sub http_parallel {
    my ($env, $count, $what, @headers) = @_;
    return exchange_parallel($env, $count,
                             parse_request('http_parallel', $what, @headers));
}

# A response's status and headers, for a diagnostic.
sub dump_response {
    my ($res) = @_;
    my $t = 'status: ' . ($res->{status} // '(none)') . "\n";
    for my $k (sort keys %{ $res->{headers} }) {
        $t .= "$k: $_\n" for @{ $res->{headers}{$k} };
    }
    return $t;
}

1;
