#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make test-deb (as root): the Debian package $DEB installed for real into
# this machine's nginx, used, disabled, enabled and purged:
#
#   - apt-get install puts the module, its load file and the modules-enabled
#     link where Debian's modules go, with a dependency on the nginx ABI
#     that the installed nginx provides, and "nginx -T" with the stock
#     /etc/nginx/nginx.conf loads it;
#   - a throwaway nginx (its own configuration, which includes
#     /etc/nginx/modules-enabled/*.conf, on a free loopback port, with its
#     own error log, pid and temp files) lets a request through and answers
#     the next with 429, and logs the module's version: the package's;
#   - make install and make uninstall with a DESTDIR put the same files and
#     link in place, then take them away;
#   - apt-get remove disables the module (the link becomes *.removed),
#     installing again enables it, apt-get purge leaves nothing.
#
# The machine is left as it was: a copy of the package installed before is
# saved (dpkg-repack) and put back, with its modules-enabled entries, and
# the pid file that "nginx -t" creates is removed if there was none. A
# running system nginx is not touched, but for the reload that Debian's
# module packages trigger. Environment: DEB (the package), MAKE.
set -eEuo pipefail
trap 'echo "test-deb: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEB=${DEB:?the package to test}
MAKE=${MAKE:-make}
NGINX_BIN=/usr/sbin/nginx
PYTHON=python3
PACKAGE=libnginx-mod-http-throttle
MODULE_SO=/usr/lib/nginx/modules/ngx_http_throttle_module.so
LOAD_FILE=/usr/share/nginx/modules-available/mod-http-throttle.conf
ENABLED_DIR=/etc/nginx/modules-enabled
ENABLED_LINK=$ENABLED_DIR/50-mod-http-throttle.conf
LOAD_LINE='load_module modules/ngx_http_throttle_module.so;'
SYSTEM_PID=/run/nginx.pid

die() { echo "test-deb: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root: it installs $PACKAGE"
[ -f "$DEB" ] || die "no package at $DEB (make deb)"

# free_port, stop_nginx, wait_http
. "$ROOT/scripts/lib/processes.sh"

WORK=$(mktemp -d /tmp/throttle-test-deb.XXXXXX)
chmod 755 "$WORK"    # nginx's workers (nobody) read its html/

failures=0
check() {
    local what=$1
    shift
    if "$@"; then
        echo "ok - $what"
    else
        echo "not ok - $what"
        failures=$((failures + 1))
    fi
}

apt_get() {
    DEBIAN_FRONTEND=noninteractive apt-get -y -qq -o DPkg::Lock::Timeout=300 \
        "$@" >>"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; die "apt-get $* failed"; }
}

package_state() {
    dpkg-query -W -f='${db:Status-Abbrev}' "$PACKAGE" 2>/dev/null | tr -d ' ' || true
}

# What a test must leave as it found it.
snapshot() {
    local dir
    for dir in "$ENABLED_DIR" "${LOAD_FILE%/*}" "${MODULE_SO%/*}"; do
        if [ -d "$dir" ]; then
            find "$dir" -printf '%p %y %l\n' | sort
        else
            echo "$dir: none"
        fi
    done
    echo "$PACKAGE: $(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$PACKAGE" 2>/dev/null || echo unknown)"
    if [ -e "$SYSTEM_PID" ]; then
        echo "$SYSTEM_PID"
    fi
}

# "nginx -t" and "-T" create the stock configuration's pid file.
stock_nginx() {
    local rc=0
    "$NGINX_BIN" "$@" 2>&1 || rc=$?
    [ -n "$PID_BEFORE" ] || rm -f "$SYSTEM_PID"
    return "$rc"
}

# The package as found, to put back at the end: "ii" (installed: saved with
# dpkg-repack), "rc" (removed, not purged) or nothing; and its links.
save_previous() {
    BEFORE=$(snapshot)
    PID_BEFORE=
    if [ -e "$SYSTEM_PID" ]; then
        PID_BEFORE=yes
    fi
    PREVIOUS=$(package_state)
    PREVIOUS_LINKS=$(find "$ENABLED_DIR" -name '*-mod-http-throttle.conf*' -printf '%f %l\n')
    if [ "$PREVIOUS" = ii ]; then
        "$ROOT/scripts/lib/deps.sh" dpkg-repack
        (cd "$WORK" && dpkg-repack "$PACKAGE" >/dev/null)
        echo "test-deb: $PACKAGE was installed; saved, it is put back at the end"
    fi
}

restore_previous() {
    local name target
    case $PREVIOUS in
        ii) apt_get install --reinstall "$(ls "$WORK/${PACKAGE}_"*.deb)" ;;
        rc) apt_get install "$DEB"
            apt_get remove "$PACKAGE" ;;
        *)  return 0 ;;
    esac
    find "$ENABLED_DIR" -name '*-mod-http-throttle.conf*' -delete
    while read -r name target; do
        if [ -n "$name" ]; then
            ln -s "$target" "$ENABLED_DIR/$name"
        fi
    done <<<"$PREVIOUS_LINKS"
}

THROWAWAY_PID=$WORK/nginx.pid
RESTORED=

# On the way out, also when a step died: the package as it was found.
# Every step is tried, whatever the one before did.
cleanup() {
    set +e
    stop_nginx "$THROWAWAY_PID"
    if [ -z "$RESTORED" ]; then
        [ -z "$(package_state)" ] || apt_get purge "$PACKAGE"
        restore_previous
    fi
    [ -n "$PID_BEFORE" ] || rm -f "$SYSTEM_PID"
    rm -rf "$WORK"
}

# The package's Depends has the nginx ABI that the installed nginx provides.
depends_on_nginx_abi() {
    local abi
    abi=$(dpkg-query -W -f='${Provides}' nginx | grep -o 'nginx-abi-[^ ,]*') || return 1
    dpkg-query -W -f='${Depends}' "$PACKAGE" | tr -d ' ' | tr ',' '\n' | grep -qx "$abi"
}

# "nginx -T" of the stock configuration shows the load file through the link.
stock_config_loads_module() {
    local dump
    dump=$(stock_nginx -T) || return 1
    grep -A1 -x "# configuration file $ENABLED_LINK:" <<<"$dump" | grep -qx "$LOAD_LINE"
}

stock_config_without_module() {
    local dump
    dump=$(stock_nginx -T) || return 1
    ! grep -q 'ngx_http_throttle_module' <<<"$dump"
}

write_throwaway_config() {
    mkdir -p "$WORK/html" "$WORK/temp"
    echo hello >"$WORK/html/index.html"
    cat >"$WORK/nginx.conf" <<EOF
include $ENABLED_DIR/*.conf;

error_log $WORK/error.log notice;
pid $THROWAWAY_PID;
worker_processes 1;

events {
    worker_connections 64;
}

http {
    access_log off;
    client_body_temp_path $WORK/temp/body;
    proxy_temp_path       $WORK/temp/proxy;
    fastcgi_temp_path     $WORK/temp/fastcgi;
    uwsgi_temp_path       $WORK/temp/uwsgi;
    scgi_temp_path        $WORK/temp/scgi;

    throttle_zone \$binary_remote_addr zone=test_deb:1m rate=1r/m;

    server {
        listen 127.0.0.1:$1;
        root $WORK/html;

        location = /ready {
            return 204;
        }

        location / {
            throttle zone=test_deb;
        }
    }
}
EOF
}

# Debian's load file names the module relative to nginx's prefix
# (/usr/share/nginx/modules is a link to /usr/lib/nginx/modules): the
# throwaway nginx keeps that prefix, and names its own error log (-e) and
# pid file.
# shellcheck disable=SC2120  # check() passes it "-t -q"
throwaway_nginx() {
    "$NGINX_BIN" -c "$WORK/nginx.conf" -e "$WORK/error.log" "$@"
}

status_of() {
    curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/"
}

# The module's version line, once, with the package's upstream version.
logs_package_version() {
    local upstream count
    upstream=$(dpkg-query -W -f='${Version}' "$PACKAGE")
    upstream=${upstream%-*}
    count=$(grep -c "\[notice\] [0-9]*#[0-9]*: ngx_http_throttle_module $upstream\$" \
                "$WORK/error.log" || true)
    [ "$count" = 1 ]
}

limits_requests() {
    local port
    port=$(free_port)
    write_throwaway_config "$port"
    check "nginx -t: a configuration with throttle_zone, modules-enabled included" \
        throwaway_nginx -t -q
    : >"$WORK/error.log"    # "nginx -t" logs the version too
    throwaway_nginx || die "the throwaway nginx does not start: $(cat "$WORK/error.log")"
    wait_http "$port" ready || die "nginx is not answering on port $port"
    check "the first request passes" [ "$(status_of "$port")" = 200 ]
    check "the next one gets 429" [ "$(status_of "$port")" = 429 ]
    check "the version line is logged once, with the package's version" \
        logs_package_version
    stop_nginx "$THROWAWAY_PID"
}

# make install and uninstall into a DESTDIR against the installed package.
staged_files() {
    (cd "$1" && find . \( -type f -o -type l \) -printf '/%P\n' | sort)
}

make_install_matches_package() {
    local stage=$WORK/stage
    "$MAKE" -C "$ROOT" --no-print-directory install DESTDIR="$stage" >"$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log" >&2; return 1; }
    check "make install: the package's paths" \
        [ "$(staged_files "$stage")" = "$(printf '%s\n' "$ENABLED_LINK" "$MODULE_SO" "$LOAD_FILE" | sort)" ]
    check "make install: the package's load file" cmp -s "$stage$LOAD_FILE" "$LOAD_FILE"
    check "make install: the package's link" \
        [ "$(readlink "$stage$ENABLED_LINK")" = "$(readlink "$ENABLED_LINK")" ]
    "$MAKE" -C "$ROOT" --no-print-directory uninstall DESTDIR="$stage" >>"$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log" >&2; return 1; }
    check "make uninstall: nothing left" [ -z "$(staged_files "$stage")" ]
}

link_renamed_removed() {
    [ "$(readlink "$ENABLED_LINK.removed")" = "$LOAD_FILE" ] && [ ! -e "$ENABLED_LINK" ]
}

link_back() {
    [ "$(readlink "$ENABLED_LINK")" = "$LOAD_FILE" ] && [ ! -e "$ENABLED_LINK.removed" ]
}

nothing_left() {
    ! dpkg -L "$PACKAGE" >/dev/null 2>&1 \
        && [ ! -e "$MODULE_SO" ] && [ ! -e "$LOAD_FILE" ] \
        && [ -z "$(find "$ENABLED_DIR" -name '*-mod-http-throttle.conf*')" ]
}

save_previous
trap cleanup EXIT
# From a clean state: what the maintainer scripts do depends on what an
# earlier installation left (an administrator's removed link stays removed).
if [ -n "$PREVIOUS" ]; then
    apt_get purge "$PACKAGE"
fi

echo "test-deb: apt-get install $DEB"
apt_get install "$DEB"
check "dpkg -L lists the module" grep -qx "$MODULE_SO" <(dpkg -L "$PACKAGE")
check "dpkg -L lists the load file" grep -qx "$LOAD_FILE" <(dpkg -L "$PACKAGE")
check "the load file loads the module" [ "$(cat "$LOAD_FILE")" = "$LOAD_LINE" ]
check "$ENABLED_LINK links to it" [ "$(readlink "$ENABLED_LINK")" = "$LOAD_FILE" ]
check "Depends: the nginx ABI the installed nginx provides" depends_on_nginx_abi
check "nginx -t: the stock nginx.conf" stock_nginx -t -q
check "nginx -T: the stock nginx.conf loads it through modules-enabled" \
    stock_config_loads_module

limits_requests
make_install_matches_package

echo "test-deb: apt-get remove, install, purge"
apt_get remove "$PACKAGE"
check "remove: the link is renamed *.removed" link_renamed_removed
check "remove: the module is gone" [ ! -e "$MODULE_SO" ]
check "remove: the stock nginx.conf no longer loads it" stock_config_without_module
apt_get install "$DEB"
check "install again: enabled again" link_back
apt_get purge "$PACKAGE"
check "purge: dpkg knows no file of it, none is left" nothing_left
restore_previous
RESTORED=yes
check "the machine is as it was (modules-enabled, modules-available, modules, $PACKAGE)" \
    [ "$(snapshot)" = "$BEFORE" ]

[ "$failures" -eq 0 ] || die "$failures check(s) failed"
echo "test-deb: all checks passed"
