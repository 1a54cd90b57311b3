#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs the Debian packages named on the command line that are missing;
# with --build-deps DIR, those that DIR/debian/control builds with.
# Idempotent: with everything present it only queries dpkg.
set -eu

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

if [ "${1:-}" = --build-deps ]; then
    cd "$2"
    dpkg-checkbuilddeps 2>/dev/null && exit 0
    echo "deps: installing the Build-Depends of $2/debian/control"
    $sudo apt-get update -qq
    $sudo apt-get build-dep -y -qq --no-install-recommends ./
    exit 0
fi

missing=""
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null \
            | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done

[ -z "$missing" ] && exit 0

echo "deps: installing$missing"
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
