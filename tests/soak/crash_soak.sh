#!/bin/sh
# crash_soak.sh - the SIGKILL crash test for many trials (default 200):
# kills omld at random moments while a client streams items and triplets,
# restarts it and checks that nothing acknowledged was lost and that the
# recovered model is bit-identical to an uninterrupted run.
# Usage: tests/soak/crash_soak.sh [TRIALS] [SEED]   (BUILD=build by default)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" -j2 --target test_crash omld >/dev/null
OPENBLAS_NUM_THREADS=1 OMLD_CRASH_TRIALS=${1:-200} OMLD_CRASH_SEED=${2:-$(date +%s)} \
    "$BUILD/test_crash"
