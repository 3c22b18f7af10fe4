#!/bin/sh
# omld-demo.sh - the main job: start omld on its defaults and run the OAHU
# Fashion-MNIST protocol through it with `omlctl eval`.
#
# omld listens on its default addresses (RPC 127.0.0.1:7600, dashboard and
# status on http://127.0.0.1:7601/) with its data in ${TMPDIR:-/tmp}/omld-demo
# (started fresh each time; a previous demo's omld is stopped first). The
# demo stores the 35,000 dev items, streams 10,000 click-like triplets,
# classifies the 35,000 test items over RPC and prints the daemon's status.
# omld then keeps running, so the dashboard shows what it learned; the last
# lines say how to stop it. Options:
#   --stop        stop omld at the end instead (SIGTERM, waits for a clean exit)
#   anything else goes to `omlctl eval` (e.g. --constraints 100000 --test-subsample 5000)
# BUILD selects the build directory (default: build).
set -eu
BUILD=${BUILD:-build}
DATA=${TMPDIR:-/tmp}/omld-demo
STOP=0
for a in "$@"; do [ "$a" = "--stop" ] && STOP=1; done

# A previous demo's daemon: stop it, start from an empty data directory.
if [ -f "$DATA/omld.pid" ] && kill -0 "$(cat "$DATA/omld.pid")" 2>/dev/null; then
    old=$(cat "$DATA/omld.pid")
    echo "omld-demo: stopping the previous demo's omld (pid $old)"
    kill -TERM "$old"
    while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
fi
rm -rf "$DATA"
mkdir -p "$DATA"

# setsid: the daemon outlives this script (and a Ctrl-C of it).
setsid "$BUILD/omld" --data_dir "$DATA" >"$DATA/omld.log" 2>&1 </dev/null &
PID=$!
echo "$PID" >"$DATA/omld.pid"
failed() {
    echo "omld-demo: $1; omld's log ($DATA/omld.log):" >&2
    cat "$DATA/omld.log" >&2
    kill "$PID" 2>/dev/null || true
    exit 1
}
i=0
while [ ! -s "$DATA/omld.addr" ]; do
    kill -0 "$PID" 2>/dev/null || failed "omld did not start"
    [ $i -ge 100 ] && failed "omld did not listen within 10 s"
    sleep 0.1
    i=$((i + 1))
done
RPC=$(awk '$1 == "rpc" { print $2 }' "$DATA/omld.addr")
HTTP=$(awk '$1 == "http" { print $2 }' "$DATA/omld.addr")
echo "omld-demo: omld is up (pid $PID): RPC $RPC, dashboard http://$HTTP/ (open it now to watch it learn)"

set +e
eval_args=""
for a in "$@"; do [ "$a" = "--stop" ] || eval_args="$eval_args $a"; done
# shellcheck disable=SC2086 # word splitting of the pass-through arguments is intended
"$BUILD/client/omlctl" --server "$RPC" eval --constraints 10000 $eval_args
rc=$?
"$BUILD/client/omlctl" --server "$RPC" status
set -e
[ $rc -eq 0 ] || failed "omlctl eval failed (exit $rc)"

if [ $STOP -eq 1 ]; then
    kill -TERM "$PID"
    if wait "$PID"; then
        echo "omld-demo: omld stopped cleanly"
    else
        failed "omld exited with status $? on SIGTERM"
    fi
else
    echo "omld-demo: omld keeps running: dashboard http://$HTTP/, status http://$HTTP/status,"
    echo "           RPC $RPC (try: $BUILD/client/omlctl watch); stop it with: kill $PID"
fi
