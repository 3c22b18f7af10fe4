#!/bin/sh
# conf_example_current.sh GENERATOR COMMITTED OUTDIR
# ctest deploy_conf_example_current: regenerates omld.conf.example from the
# daemon's option table into OUTDIR and compares it with the committed file.
set -eu
gen=$1 committed=$2 out=$3/omld.conf.example
mkdir -p "$3"
"$gen" "$out"
if ! diff -u "$committed" "$out"; then
    echo >&2
    echo "deploy_conf_example_current: $committed is out of date with the option table" >&2
    echo "(daemon/options.c). Regenerate it and commit the result:" >&2
    echo "    cmake --build <build-dir> --target omld-conf-example" >&2
    exit 1
fi
echo "deploy_conf_example_current: $committed matches the option table"
