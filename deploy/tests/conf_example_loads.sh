#!/bin/sh
# conf_example_loads.sh OMLD EXAMPLE WORKDIR
# ctest deploy_conf_example_loads: omld accepts the example as its config
# file, the example reproduces the built-in defaults exactly, and omld starts
# with it (data_dir, listen and http overridden on the command line: a temp
# directory and port 0), answers /livez and stops cleanly on SIGTERM.
set -eu
omld=$1 example=$2
work=$(mktemp -d "$3/loads.XXXXXX")
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deploy_conf_example_loads: $*" >&2; [ -f "$work/log" ] && cat "$work/log" >&2; exit 1; }

over="--data_dir $work/data --listen 127.0.0.1:0 --http 127.0.0.1:0"
# shellcheck disable=SC2086
"$omld" --config "$example" $over --print-config >"$work/from-example" || fail "omld refused $example"
# shellcheck disable=SC2086
"$omld" $over --print-config >"$work/defaults"
diff -u "$work/defaults" "$work/from-example" || fail "$example does not reproduce the built-in defaults"

# shellcheck disable=SC2086
OPENBLAS_NUM_THREADS=1 "$omld" --config "$example" $over >"$work/log" 2>&1 &
pid=$!
i=0
while [ ! -s "$work/data/omld.addr" ]; do
    kill -0 "$pid" 2>/dev/null || fail "omld exited at startup"
    [ $i -lt 200 ] || fail "no address file after 20 s"
    sleep 0.1
    i=$((i + 1))
done
http=$(awk '$1 == "http" { print $2 }' "$work/data/omld.addr")
python3 - "$http" <<'PY' || fail "GET /livez failed"
import sys, urllib.request
with urllib.request.urlopen("http://%s/livez" % sys.argv[1], timeout=10) as r:
    assert r.status == 200, r.status
PY
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "omld exited with status $rc after SIGTERM"
echo "deploy_conf_example_loads: omld started with $example (http $http) and stopped cleanly"
