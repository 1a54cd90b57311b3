# SPDX-License-Identifier: BSD-2-Clause
package ThrottleTest::Nginx;

# nginx for the integration tests: a temporary prefix with a docroot, the
# configuration written from a block's sections, nginx started, reloaded
# and stopped (and killed at exit). The POD below says what a block's nginx
# looks like.

=head1 WHAT EACH BLOCK GETS

A fresh nginx in its own temporary prefix (removed afterwards), started
with C<-p PREFIX -c PREFIX/conf/nginx.conf> and stopped (SIGQUIT, then
TERM, then KILL) at the end of the block. The generated configuration:

    load_module $TEST_THROTTLE_MODULE;
    pid, error_log PREFIX/logs/error.log info;
    worker_processes 2; daemon on; master_process on;
    <main_config>
    http {
        access_log off;          # unless a section mentions access_log
        types, *_temp_path under the prefix
        <http_config>
        server {
            listen 127.0.0.1:<a free port picked at run time, another
                              one if some other process took it first>
                   [reuseport: when the block has --- distinct];
            root PREFIX/html;
            <config>
        }
    }

The docroot holds C</index.html> ("index page"), C</a.txt> ("a"),
C</b.txt> ("b") and C</dir/index.html> ("dir index"). The configuration
sections may use C<$TEST_NGINX_PORT>, C<$TEST_NGINX_PREFIX> and
C<$TEST_NGINX_HTML_DIR>, replaced before nginx sees them.

Remember that C<return> runs in the rewrite phase, before the access phase
where the module decides: limited locations must serve files (or
C<empty_gif>).

=cut

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path);
use File::Spec;
use File::Temp;
use FindBin;
use IO::Socket::INET;
use Test::More ();
use Time::HiRes qw(time);
use Processes qw($TIMEOUT free_port read_file run_cmd children_of alive
                 wait_gone wait_until others_listen waits_for_signals);

our @EXPORT_OK = qw(check_binaries setup_prefix write_config nginx_cmd
                    start_nginx stop_nginx reload_nginx);

my $NGINX  = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
my $MODULE = $ENV{TEST_THROTTLE_MODULE}
    || File::Spec->rel2abs("$FindBin::Bin/../build/ngx_http_throttle_module.so");

my %running;    # master pid => prefix, for the END block

# The files every block's docroot starts with.
my %DOCROOT = (
    'index.html'     => "index page\n",
    'a.txt'          => "a\n",
    'b.txt'          => "b\n",
    'dir/index.html' => "dir index\n",
);

# Stops the whole run (BAIL_OUT) when there is no nginx or no module.
sub check_binaries {
    Test::More::BAIL_OUT("nginx binary $NGINX is not executable")
        unless -x $NGINX;
    Test::More::BAIL_OUT("module $MODULE not found: run make build")
        unless -f $MODULE;
}

# ---------------------------------------------------------------------------
# Prefix, configuration

# A temporary prefix with the docroot and --- user_files; returns the $env
# every other function takes: { dir, prefix, port, conf, log }.
sub setup_prefix {
    my ($sec) = @_;

    my $dir = File::Temp->newdir('throttle-test-XXXXXX', TMPDIR => 1);
    my $prefix = "$dir";
    chmod 0755, $prefix;

    for my $d (qw(conf logs html tmp)) {
        make_path("$prefix/$d");
        chmod 0755, "$prefix/$d";
    }

    my %files = %DOCROOT;
    if (defined $sec->{user_files}) {
        my @parts = split /^>>>[ \t]*(\S+)[ \t]*\n/m, $sec->{user_files};
        shift @parts;
        while (@parts) {
            my ($path, $content) = splice @parts, 0, 2;
            $files{$path} = $content;
        }
    }

    for my $path (sort keys %files) {
        my $full = "$prefix/html/$path";
        (my $parent = $full) =~ s{/[^/]+$}{};
        make_path($parent, { mode => 0755 });
        open my $fh, '>', $full or die "$full: $!";
        print $fh $files{$path};
        close $fh;
        chmod 0644, $full;
    }

    return {
        dir    => $dir,    # keeps the directory alive
        prefix => $prefix,
        port   => free_port(),
        conf   => "$prefix/conf/nginx.conf",
        log    => "$prefix/logs/error.log",
    };
}

# A configuration section with the $TEST_NGINX_* and $TEST_REDIS_* names
# replaced.
sub expand {
    my ($env, $text) = @_;
    return '' unless defined $text;
    $text =~ s/\$TEST_NGINX_PORT\b/$env->{port}/g;
    $text =~ s/\$TEST_NGINX_PREFIX\b/$env->{prefix}/g;
    $text =~ s/\$TEST_NGINX_HTML_DIR\b/$env->{prefix}\/html/g;
    my @redis = @{ $env->{redis} || [] };
    $text =~ s{\$TEST_REDIS_PORT(?:_(\d+))?\b}{
        my $i = ($1 // 1) - 1;
        $redis[$i] ? $redis[$i]->port
                   : die "\$TEST_REDIS_PORT" . ($1 ? "_$1" : '')
                         . ": no such server in --- redis\n";
    }ge;
    # a Redis backend with no timeout= gets the block's (see
    # default_timeout in ThrottleTest::Blocks)
    if (my $timeout = $env->{redis_timeout}) {
        $text =~ s{(\bthrottle_redis\b[^;]*?)\s*;}{
            my $d = $1;
            $d =~ /\btimeout=/ ? "$d;" : "$d timeout=$timeout;"
        }ge;
    }
    $text = expand_groups($text, @redis);
    if ($text =~ /\$TEST_REDIS_TLS_DIR\b/) {
        my ($tls) = grep { $_->can('tls') && $_->tls } @redis;
        die "\$TEST_REDIS_TLS_DIR: no tls server in --- redis\n" unless $tls;
        my $dir = $tls->tls->{dir};
        $text =~ s/\$TEST_REDIS_TLS_DIR\b/$dir/g;
    }
    return $text;
}

# $TEST_REDIS_CLUSTER (the first cluster's nodes), $TEST_REDIS_SENTINELS
# and $TEST_REDIS_MASTER_NAME (the first sentinel setup's) replaced.
sub expand_groups {
    my ($text, @redis) = @_;
    my %value = (
        CLUSTER     => [seeds       => grep { $_->can('seeds') } @redis],
        SENTINELS   => [sentinels   => grep { $_->can('sentinels') } @redis],
        MASTER_NAME => [master_name => grep { $_->can('sentinels') } @redis],
    );
    $text =~ s{\$TEST_REDIS_(CLUSTER|SENTINELS|MASTER_NAME)\b}{
        my ($method, $group) = @{ $value{$1} };
        $group ? $group->$method
               : die "\$TEST_REDIS_$1: no " . ($1 eq 'CLUSTER' ? 'cluster' : 'sentinel')
                     . " in --- redis\n";
    }ge;
    return $text;
}

sub write_config {
    my ($env, $main, $http, $server) = @_;
    my $p = $env->{prefix};
    $env->{sections} = [$main, $http, $server];    # for another port

    my $access_log = (($http // '') . ($server // '')) =~ /\baccess_log\b/
        ? '' : "    access_log off;\n";

    my $conf = <<"CONF";
load_module $MODULE;

pid $p/logs/nginx.pid;
error_log $p/logs/error.log info;
worker_processes 2;
daemon on;
master_process on;

events {
    worker_connections 256;
}

${\ expand($env, $main)}

http {
$access_log    default_type text/plain;
    types {
        text/html  html;
        text/plain txt;
    }

    client_body_temp_path $p/tmp/client_body;
    proxy_temp_path       $p/tmp/proxy;
    fastcgi_temp_path     $p/tmp/fastcgi;
    uwsgi_temp_path       $p/tmp/uwsgi;
    scgi_temp_path        $p/tmp/scgi;

${\ expand($env, $http)}

    server {
        listen 127.0.0.1:$env->{port}${\ ($env->{reuseport} ? ' reuseport' : '')};
        server_name localhost;
        root $p/html;

${\ expand($env, $server)}
    }
}
CONF

    open my $fh, '>', $env->{conf} or die "$env->{conf}: $!";
    print $fh $conf;
    close $fh;
    chmod 0644, $env->{conf};
}

# ---------------------------------------------------------------------------
# Processes

# Runs the nginx binary on this prefix and configuration: (exit code,
# output).
sub nginx_cmd {
    my ($env, @args) = @_;
    return run_cmd([$NGINX, '-p', "$env->{prefix}/", '-c', $env->{conf}, @args]);
}

sub can_connect {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1',
        PeerPort => $port,
        Proto    => 'tcp',
        Timeout  => 1,
    );
    return 0 unless $s;
    close $s;
    return 1;
}

# Starts nginx; returns its master pid, or undef and a reason. The port
# picked free can be taken before nginx binds it (other processes connect
# and listen meanwhile), or shared with another process's reuseport
# listener: then nginx starts again on another port.
sub start_nginx {
    my ($env) = @_;
    $env->{started} = time;    # nothing this nginx did is older
    for my $attempt (1 .. 3) {
        my ($master, $err, $taken) = start_on_port($env);
        return ($master, $err) unless $taken && $attempt < 3;
        stop_nginx($master) if $master;
        $env->{port} = free_port();
        write_config($env, @{ $env->{sections} });
    }
}

# One try of start_nginx: (master pid, why it failed, whether the port was
# someone else's).
sub start_on_port {
    my ($env) = @_;
    my $port = $env->{port};
    my ($rc, $out) = nginx_cmd($env);
    return (undef, "nginx exited with $rc:\n$out",
            $out =~ /bind\(\) to 127\.0\.0\.1:$port failed .*Address already in use/)
        if $rc != 0;

    my $pidfile = "$env->{prefix}/logs/nginx.pid";
    my $deadline = time + $TIMEOUT;
    my $master = wait_until($TIMEOUT, sub {
        read_file($pidfile) =~ /^(\d+)/ ? $1 : undef;
    });
    return (undef, "no pid file after ${TIMEOUT}s:\n$out"
                   . read_file($env->{log})) unless $master;

    $running{$master} = $env->{prefix};

    my @workers;
    return ($master, "nginx not serving on port $port after ${TIMEOUT}s:\n"
                     . read_file($env->{log})) unless wait_until($deadline - time, sub {
        @workers = children_of($master);
        return @workers >= 2 && can_connect($port);
    });
    return ($master, "another process listens on port $port too", 1)
        if $env->{reuseport} && others_listen($port, $master, @workers);
    return ($master, '');
}

# Graceful stop (SIGQUIT, as "nginx -s quit" sends it; a signal rather than
# "-s quit" because the configuration on disk may be one a reload refused),
# then TERM, then KILL for the master and its workers.
sub stop_nginx {
    my ($master) = @_;
    return 1 unless $master;
    my @all = ($master, children_of($master));
    kill 'QUIT', $master;
    my $clean = wait_gone($TIMEOUT, @all);
    unless ($clean) {
        @all = ($master, children_of($master));
        kill 'TERM', @all;
        unless (wait_gone(2, @all)) {
            kill 'KILL', @all;
            wait_gone(2, @all);
        }
    }
    delete $running{$master};
    return $clean;
}

# "nginx -s reload"; then waits until either the old workers are gone and
# new ones serve (success) or the master logged why it refused (failure).
# Returns (success, text logged since the reload + signaller output).
sub reload_nginx {
    my ($env, $master) = @_;
    my @old = children_of($master);
    my $offset = -s $env->{log} || 0;

    my ($rc, $out) = nginx_cmd($env, '-s', 'reload');
    return (0, "nginx -s reload exited with $rc:\n$out", \@old) if $rc != 0;

    my %old = map { $_ => 1 } @old;
    my $text = '';
    my $outcome = wait_until($TIMEOUT * 2, sub {
        $text = substr(read_file($env->{log}), $offset);
        return 'refused' if $text =~ /\[emerg\]/;
        my @now = children_of($master);
        return !grep({ alive($_) } @old) && @now >= 2
            && !grep({ $old{$_} } @now) && can_connect($env->{port})
            ? 'done' : '';
    });
    return (1, $text . $out, \@old) if $outcome eq 'done';
    if ($outcome eq 'refused') {
        # the rest of what it logs: it is done once it waits for signals
        wait_until($TIMEOUT, sub { waits_for_signals($master) });
        $text = substr(read_file($env->{log}), $offset);
        return (0, $text . $out, \@old);
    }
    return (0, "reload did not complete in time\n$text$out", \@old);
}

# Interrupted: exit so that END stops nginx. A write to a socket the server
# closed must fail with EPIPE, not kill the test (nor would a closed stdout).
$SIG{$_} = sub { exit 1 } for qw(INT TERM HUP);
$SIG{PIPE} = 'IGNORE';

END {
    for my $master (keys %running) {
        my @all = ($master, children_of($master));
        kill 'KILL', @all;
    }
}

1;
