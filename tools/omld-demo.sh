#!/bin/sh
# omld-demo.sh - the main job: start omld on its defaults and run the OAHU
# Fashion-MNIST protocol through it with `omlctl eval`.
#
# omld listens on its default addresses (RPC 127.0.0.1:7600, status
# http://127.0.0.1:7601/status) with a fresh temporary data directory; the
# demo stores the 35,000 dev items, streams 10,000 click-like triplets,
# classifies the 35,000 test items over RPC, prints the daemon's status and
# stops it with SIGTERM. Extra arguments go to `omlctl eval` (e.g.
# --constraints 100000 --test-subsample 5000). BUILD selects the build
# directory (default: build).
set -eu
BUILD=${BUILD:-build}
DATA=$(mktemp -d "${TMPDIR:-/tmp}/omld-demo.XXXXXX")
"$BUILD/omld" --data_dir "$DATA" >"$DATA/omld.log" 2>&1 &
PID=$!
cleanup() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT INT TERM

i=0
while [ ! -s "$DATA/omld.addr" ]; do
    if ! kill -0 "$PID" 2>/dev/null || [ $i -ge 100 ]; then
        echo "omld-demo: omld did not start; its log:" >&2
        cat "$DATA/omld.log" >&2
        exit 1
    fi
    sleep 0.1
    i=$((i + 1))
done
RPC=$(awk '$1 == "rpc" { print $2 }' "$DATA/omld.addr")
HTTP=$(awk '$1 == "http" { print $2 }' "$DATA/omld.addr")
echo "omld-demo: omld is up (pid $PID): RPC $RPC, status http://$HTTP/status, metrics http://$HTTP/metrics"

"$BUILD/client/omlctl" --server "$RPC" eval --constraints 10000 "$@"
"$BUILD/client/omlctl" --server "$RPC" status

kill -TERM "$PID"
if wait "$PID"; then
    echo "omld-demo: omld stopped cleanly"
else
    echo "omld-demo: omld exited with status $?; its log:" >&2
    cat "$DATA/omld.log" >&2
    exit 1
fi
