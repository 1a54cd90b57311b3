#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make sanitize, once the sanitized build is there: every test again, on
# the core and the module built with AddressSanitizer and UBSan, and the
# reports read from their files (tests that pass say nothing about reports
# made in a worker).
#
#   1. the check of the setup: nginx with the module of planted bugs
#      (probe/, by plant.pl); their three reports must arrive, or the run
#      stops there;
#   2. the unit tests (the binary, built with the sanitizers);
#   3. the integration tests, on Debian's nginx with the runtimes and
#      preload.c's object preloaded (nginx.sh);
#   4. check_reports.pl on the reports of 2 and 3: one with a frame of the
#      module, the core or hiredis fails the run.
#
# (probe/, plant.pl, preload.c, nginx.sh and check_reports.pl are beside
# this script, in scripts/sanitize/.)
#
# Stacks are walked by frame pointers, but Debian's nginx has none: a stack
# through ngx_alloc, where the module gets much of its memory, would stop
# there. So steps 1 and 3 walk the stacks of allocations by the unwind
# tables (fast_unwind_on_malloc=0), so that a leak names the module's
# frames, and keep 10 frames of each (malloc_context_size). On the paths
# the module allocates by, its own frame is within the first 6 (the
# deepest: malloc, CRYPTO_malloc, CRYPTO_zalloc, SSL_new,
# ngx_ssl_create_connection, ours), and the walk's own frames take two of
# the 10. Walking all 30 of the default makes every malloc slow enough to
# put some tests' first requests (a TLS handshake) past their 50 ms Redis
# timeouts; with 8, a whole pass took as long as one walked by frame
# pointers (439 s and 441 s). Step 1 checks that a leak through ngx_alloc
# still names its module: with 4 frames it does not.
#
# The reports are written as the user of nginx's workers (nobody), into a
# directory anyone may write to (mode 1777), and kept in $BUILD/reports.
#
# Environment: BUILD (default build/sanitize), NGINX_BIN (default
# /usr/sbin/nginx).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-$ROOT/build/sanitize}
export SANITIZE_NGINX=${NGINX_BIN:-/usr/sbin/nginx}
MODULE=$BUILD/ngx_http_throttle_module.so
PROBE=$BUILD/nginx/objs/ngx_http_sanitize_probe_module.so
KEPT=$BUILD/reports

# The runtimes of the compiler that built the module; ASan's first.
ASAN_RUNTIME=$(cc -print-file-name=libasan.so)
UBSAN_RUNTIME=$(cc -print-file-name=libubsan.so)
export SANITIZE_PRELOAD="$ASAN_RUNTIME $BUILD/sanitize_preload.so $UBSAN_RUNTIME"

REPORTS=$(mktemp -d "${TMPDIR:-/tmp}/throttle-sanitize-XXXXXX")
chmod 0755 "$REPORTS"
keep_reports() {
    rm -rf "$KEPT"
    mv "$REPORTS" "$KEPT"
}
trap keep_reports EXIT

# nginx's exit status must not change for its own leaks (nginx -s reload
# leaks its cycle's pool): for nginx, the reports say it all.
NGINX_ASAN=exitcode=0
LEAK_STACKS=fast_unwind_on_malloc=0:malloc_context_size=10

# The sanitizers' options for stage $1 ($2 says what it is), its reports
# into $REPORTS/$1, with more AddressSanitizer options in $3.
# print_stacktrace=1 makes a worker slow at its first UBSan report (past a
# 50 ms Redis timeout): a test may then fail, and the report says why.
# UBSan's log_path is ASan's: see preload.c.
sanitize_stage() {
    local dir=$REPORTS/$1
    mkdir "$dir"
    chmod 1777 "$dir"
    export ASAN_OPTIONS="log_path=$dir/asan${3:+:$3}"
    export UBSAN_OPTIONS="log_path=$dir/asan:print_stacktrace=1"
    export SANITIZE_UBSAN_LOG_PATH=$dir/ubsan
    echo "sanitize: $2"
}

# The integration tests, two files at a time, as make test runs them: they
# wait on timers and on Redis far more than they compute, so the sanitized
# run takes about what make test's does per file (one at a time took 531 s
# in CI, two 337 s). The floods are smaller than make test's: a sanitizer
# looks for bad memory, which 200,000 keys evicting from a zone of 40,000
# exercise as well as a million, and the sanitized nginx runs them three
# times slower. For the same reason the timing tests (t/lib/Timeline.pm)
# allow a timer to fire 80 ms late rather than 40: a sanitized worker,
# beside another test file on two cores, once answered 42 ms late.
integration_tests() {
    FLOOD_KEYS=200000 FLOOD_SECONDS=2 TEST_TIMING_TOLERANCE_MS=80 \
        TEST_NGINX_BINARY=$HERE/nginx.sh TEST_THROTTLE_MODULE=$MODULE \
        prove --timer -j 2 -I t/lib t/*.t
}

# Frames of ours: the sources of the glue, the core and the unit tests, the
# core's generated sources and the unit test binary (in $BUILD/core), and
# the module, which holds hiredis (its frames name no source).
check_reports() {
    perl "$HERE/check_reports.pl" \
        --ours "$ROOT/ngx_module/" --ours "$ROOT/src/" \
        --ours "$ROOT/t/unit/" --ours "$BUILD/core/" --ours "$MODULE" "$@"
}

cd "$ROOT"
failed=0

sanitize_stage plant "planted bugs, to see their reports arrive" \
    "$NGINX_ASAN:$LEAK_STACKS"
TEST_NGINX_BINARY=$HERE/nginx.sh TEST_THROTTLE_MODULE=$PROBE \
    perl "$HERE/plant.pl"
if ! check_reports --planted "$HERE/probe/" --planted "$PROBE" \
        "$REPORTS/plant"; then
    echo "sanitize: FAILED: the setup loses reports, the tests were not run"
    exit 1
fi

sanitize_stage unit "the unit tests"
(cd "$BUILD/core" && LD_PRELOAD="$ASAN_RUNTIME $BUILD/sanitize_preload.so" \
    ./throttle_unit_tests --gtest_brief=1) || failed=1

sanitize_stage integration "the integration tests" \
    "$NGINX_ASAN:$LEAK_STACKS"
integration_tests || failed=1

echo "sanitize: the reports of the unit and integration tests"
check_reports "$REPORTS/unit" "$REPORTS/integration" || failed=1

if [ "$failed" -ne 0 ]; then
    echo "sanitize: FAILED (reports kept in $KEPT)"
    exit 1
fi
echo "sanitize: passed (reports kept in $KEPT)"
