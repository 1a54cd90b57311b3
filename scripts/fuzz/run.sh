#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# make fuzz: runs each libFuzzer target of this folder (<target>.cpp) for
# FUZZ_SECONDS (default 60) on a fresh copy of its seed corpus
# (corpus/<target>/, which stays as committed), with fuzz.dict, FUZZ_JOBS
# (default 1) targets at a time, then prints a table; fails if any target
# crashed.
#
#   scripts/fuzz/run.sh BUILD_DIR     (the targets, built by make fuzz)
#
# A target's run is under BUILD_DIR/run/<target>/: its log, its grown
# corpus, and the input of a crash (crash-*, timeout-*, oom-*, leak-*),
# which the target reruns by itself: BUILD_DIR/<target> <input>.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
RUNS=$BUILD/run

# libFuzzer's last status line ("#N DONE cov: C ft: F corp: U/...") and
# its final stats give the figures of a run.
figure() {
    local log=$1 pattern=$2
    grep -o "$pattern" "$log" | tail -1 | grep -o '[0-9]*$' || echo '?'
}

run_target() {
    local name=$1 dir=$RUNS/$1 result
    mkdir -p "$dir/corpus"
    if [ -d "$HERE/corpus/$name" ]; then
        cp "$HERE/corpus/$name"/* "$dir/corpus/"
    fi
    # -timeout: an input that takes 10 s stalls a worker as surely as a
    # crash stops it
    if "$BUILD/$name" -max_total_time="$SECONDS_EACH" -timeout=10 \
            -dict="$HERE/fuzz.dict" -print_final_stats=1 \
            -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1; then
        result=ok
    else
        result="FAILED: $(grep -o 'Test unit written to .*' "$dir/log" \
                          | sed 's/Test unit written to //' || true)"
    fi
    # the table's row, printed in the targets' order once all have run
    printf '%-16s %12s %6s %7s %7s  %s\n' "$name" \
        "$(figure "$dir/log" 'stat::number_of_executed_units: [0-9]*')" \
        "$(figure "$dir/log" 'cov: [0-9]*')" \
        "$(figure "$dir/log" 'ft: [0-9]*')" \
        "$(figure "$dir/log" 'corp: [0-9]*')" "$result" >"$dir/row"
}

rm -rf "$RUNS"
mkdir -p "$RUNS"
echo "fuzz: each target for ${SECONDS_EACH}s, $JOBS at a time; runs under $RUNS"
targets=()
for source in "$HERE"/*.cpp; do
    targets+=("$(basename "$source" .cpp)")
done
for name in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
        wait -n || true
    done
    run_target "$name" &
done
wait
printf '%-16s %12s %6s %7s %7s  %s\n' target runs cov features corpus result
failed=0
for name in "${targets[@]}"; do
    cat "$RUNS/$name/row"
    grep -q ' ok$' "$RUNS/$name/row" || failed=1
done
if [ "$failed" -ne 0 ]; then
    echo "fuzz: a target failed; its log is $RUNS/<target>/log" >&2
fi
exit "$failed"
