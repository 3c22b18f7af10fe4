#!/bin/sh
# Fuzzes the frame reader + envelope decoding with libFuzzer for a while.
# Usage: tests/fuzz/run.sh [seconds]   (default 3600; needs clang)
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-3600}
CC=clang cmake -S . -B build-fuzz -DOML_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz --target fuzz_frame -j2
mkdir -p build-fuzz/corpus
./build-fuzz/fuzz_frame -max_total_time="$secs" -max_len=70000 build-fuzz/corpus tests/fuzz/corpus
