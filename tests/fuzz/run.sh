#!/bin/sh
# Fuzzes both libFuzzer targets for a while, splitting the time:
#   fuzz_frame    the frame reader + envelope decoding (corpus tests/fuzz/corpus)
#   fuzz_request  one Request through validation and every handler in process
#                 (corpus tests/fuzz/corpus_request)
# and prints each target's execution count. Exits non-zero on the first
# crash, leak, sanitizer report or failed check (the reproducer is written to
# build-fuzz/artifacts/); the CI run (tests/run.sh) uses this with 60 s.
# Usage: tests/fuzz/run.sh [seconds]   (total; default 3600; needs clang)
# Environment: FUZZ_JOBS=n runs n workers per target (-fork=n; default 1).
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-3600}
half=$((secs / 2))
[ "$half" -ge 1 ] || half=1
export OPENBLAS_NUM_THREADS=1
CC=clang cmake -S . -B build-fuzz -DOML_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target fuzz_frame fuzz_request -j"$(nproc 2>/dev/null || echo 2)"
mkdir -p build-fuzz/corpus build-fuzz/corpus_request build-fuzz/artifacts
fork=""
if [ "${FUZZ_JOBS:-1}" -gt 1 ]; then fork="-fork=$FUZZ_JOBS"; fi

summary=""
fuzz() { # target max_len corpus...
    target=$1; maxlen=$2; shift 2
    log=build-fuzz/$target.log
    echo "== $target: ${half}s =="
    status=0
    # shellcheck disable=SC2086
    ./build-fuzz/"$target" -max_total_time="$half" -max_len="$maxlen" -print_final_stats=1 \
        -artifact_prefix=build-fuzz/artifacts/"$target"- $fork "$@" >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(grep -o 'stat::number_of_executed_units: [0-9]*\|#[0-9]*' "$log" | tail -n 1 | tr -dc 0-9)
    summary="$summary$target: ${runs:-?} executions in ${half}s
"
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log"
        echo "$target FAILED (exit $status); log $log, reproducer in build-fuzz/artifacts/" >&2
        printf '%s' "$summary"
        exit 1
    fi
}
fuzz fuzz_frame 70000 build-fuzz/corpus tests/fuzz/corpus
fuzz fuzz_request 70000 build-fuzz/corpus_request tests/fuzz/corpus_request
printf '%s' "$summary"
total=$(printf '%s' "$summary" | sed -n 's/.*: \([0-9]*\) executions.*/\1/p' | awk '{s += $1} END {print s + 0}')
echo "fuzz: no findings, $total executions in total"
