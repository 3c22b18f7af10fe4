#!/bin/sh
# Sets everything up and runs the whole test suite twice: in the Release
# build and in the AddressSanitizer + UndefinedBehaviorSanitizer build.
# Usage: tests/run.sh            (from anywhere; builds under ./build and ./build-asan)
set -eu
cd "$(dirname "$0")/.."

./deploy/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
export OPENBLAS_NUM_THREADS=1

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ASan + UBSan build =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOML_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "all tests passed (Release and ASan+UBSan)"
