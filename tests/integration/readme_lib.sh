# shellcheck shell=sh
# readme_lib.sh - what the scripts that run the README's examples share
# (sourced, POSIX sh): a temporary directory, removed at exit with the
# daemon started in it, and that daemon.
tmp=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# start_omld BIN [ARGS...]: omld with ARGS on $tmp/data and ephemeral
# ports; sets pid, rpc and http (HOST:PORT) once its address file is there.
start_omld() {
    bin=$1
    shift
    "$bin" "$@" --data_dir "$tmp/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
        --log_level warn >"$tmp/omld.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
        [ -s "$tmp/data/omld.addr" ] && break
        sleep 0.05
    done
    # shellcheck disable=SC2034 # rpc and http are for the scripts that source this
    rpc=$(sed -n 's/^rpc //p' "$tmp/data/omld.addr" 2>/dev/null)
    http=$(sed -n 's/^http //p' "$tmp/data/omld.addr" 2>/dev/null)
    [ -n "$http" ] || { cat "$tmp/omld.log" >&2; echo "$0: omld did not start" >&2; exit 1; }
}
