#!/bin/sh
# Sets everything up and runs the whole test suite by CTest label (the tiers
# are listed in CMakeLists.txt): every test in the Release build; again in
# the AddressSanitizer + UndefinedBehaviorSanitizer build, but for the
# `static` checks a sanitizer cannot affect; the `daemon` tests and the
# units that start threads of their own (`threads`) in a ThreadSanitizer
# build; and (when clang is installed) a bounded libFuzzer
# run of both fuzz targets.
# Usage: tests/run.sh   (from anywhere; builds under ./build, ./build-asan,
#                        ./build-tsan and ./build-fuzz)
# Environment: FUZZ_SECONDS (total for both fuzz targets, default 60; 0
# skips), TSAN_CC (compiler of the TSan build, default gcc).
set -eu
cd "$(dirname "$0")/.."

./deploy/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
export OPENBLAS_NUM_THREADS=1
t0=$(date +%s)
lap() { echo "-- $1 took $(( $(date +%s) - t0 )) s so far"; }

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
lap Release

echo "== ASan + UBSan build =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOML_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE '^static$'
lap ASan

# The daemon under ThreadSanitizer: omld and the tests that drive it. Every
# process (the tests and each omld they start, whose stderr goes to a log
# the harness deletes) writes its reports under build-tsan/tsan-reports, so
# a report fails the run even when the test that caused it passed.
# tests/tsan.supp holds the few entries for uninstrumented libraries.
echo "== ThreadSanitizer build (daemon and threads tests) =="
CC=${TSAN_CC:-gcc} cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOML_TSAN=ON >/dev/null
# Each such test is an executable of its name: build those and omld only.
tsan_tests=$(ctest --test-dir build-tsan -N -L '^(daemon|threads)$' | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$tsan_tests" ] || { echo "no test labelled daemon" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build build-tsan -j"$jobs" --target omld $tsan_tests
reports=$PWD/build-tsan/tsan-reports
rm -rf "$reports"
mkdir -p "$reports"
# A test that fails because a report halted omld still prints the report.
tsan_rc=0
# history_size=7 (the most): the suppressions of libuv's fd reuse
# (tests/tsan.supp) match the old connection's stack, which TSan must still
# hold; with the default history a fresh clone's CI once printed that
# report with "[failed to restore the stack]" and failed on it.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$PWD/tests/tsan.supp log_path=$reports/tsan" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L '^(daemon|threads)$' || tsan_rc=$?
if [ -n "$(ls -A "$reports")" ]; then
    for f in "$reports"/*; do echo "---- $f"; cat "$f"; done
    echo "ThreadSanitizer reported $(ls "$reports" | wc -l) problem(s) (above; $reports)" >&2
    exit 1
fi
[ "$tsan_rc" -eq 0 ] || exit "$tsan_rc"
lap TSan

# libFuzzer needs clang and its runtime (libclang-rt-*-dev, only recommended
# by Debian's clang): probe both by linking an empty fuzz target.
fuzz_secs=${FUZZ_SECONDS:-60}
have_libfuzzer() {
    probe=$(mktemp -d)
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n%s\n' \
        'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n; }' \
        >"$probe/p.c"
    ok=1
    clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1 || ok=0
    rm -rf "$probe"
    [ "$ok" -eq 1 ]
}
if [ "$fuzz_secs" -gt 0 ] && command -v clang >/dev/null 2>&1 && have_libfuzzer; then
    echo "== libFuzzer: fuzz_frame + fuzz_request, ${fuzz_secs} s in all =="
    ./tests/fuzz/run.sh "$fuzz_secs"
    lap fuzz
    echo "all tests passed (Release, ASan+UBSan, TSan, fuzz)"
else
    [ "$fuzz_secs" -gt 0 ] && echo "WARNING: clang with libFuzzer is not installed: the fuzz run was skipped" >&2
    echo "all tests passed (Release, ASan+UBSan, TSan)"
fi
