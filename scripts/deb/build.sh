#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make deb: builds the Debian package libnginx-mod-http-throttle (debian/)
# out of a copy of the files named on the command line, in $BUILD/deb/, so
# that the tree is left as it was. The source package (its orig tarball is
# the copy without debian/) and the binary packages are built there, lintian
# checks them (an error fails), and the binary package is copied to
# $BUILD/. docs/packaging.md says what the package holds.
#
#   scripts/deb/build.sh FILE...
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
WORK=$BUILD/deb

cd "$ROOT"
name=$(dpkg-parsechangelog -S Source)
version=$(dpkg-parsechangelog -S Version)
upstream=${version%-*}
arch=$(dpkg --print-architecture)
tree=$name-$upstream

rm -rf "$WORK"
mkdir -p "$WORK/$tree"
cp -r "$@" "$WORK/$tree/"
tar -C "$WORK" --exclude="$tree/debian" -cJf "$WORK/${name}_$upstream.orig.tar.xz" "$tree"

"$ROOT/scripts/lib/deps.sh" --build-deps "$WORK/$tree"

echo "deb: dpkg-buildpackage in $WORK/$tree (log: $WORK/build.log)"
if ! (cd "$WORK/$tree" && dpkg-buildpackage -us -uc) >"$WORK/build.log" 2>&1; then
    tail -30 "$WORK/build.log"
    exit 1
fi

echo "deb: lintian"
lintian --fail-on error "$WORK/${name}_${version}_$arch.changes"

cp "$WORK/${name}_${version}_$arch.deb" "$BUILD/"
echo "deb: $BUILD/${name}_${version}_$arch.deb"
