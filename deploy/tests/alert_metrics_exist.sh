#!/bin/sh
# alert_metrics_exist.sh OMLD WORKDIR FILE...
# ctest deploy_alert_metrics_exist: every omld_* metric name used in FILE...
# (the alert rules, the README) is a family that a live omld exports on
# GET /metrics (or a histogram's _bucket/_sum/_count series).
set -eu
omld=$1
work=$(mktemp -d "$2/metrics.XXXXXX")
shift 2
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "deploy_alert_metrics_exist: $*" >&2; [ -f "$work/log" ] && cat "$work/log" >&2; exit 1; }

OPENBLAS_NUM_THREADS=1 "$omld" --data_dir "$work/data" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    >"$work/log" 2>&1 &
pid=$!
i=0
while [ ! -s "$work/data/omld.addr" ]; do
    kill -0 "$pid" 2>/dev/null || fail "omld exited at startup"
    [ $i -lt 200 ] || fail "no address file after 20 s"
    sleep 0.1
    i=$((i + 1))
done
http=$(awk '$1 == "http" { print $2 }' "$work/data/omld.addr")
python3 - "$http" "$@" <<'PY' || fail "metric names missing (above)"
import re, sys, urllib.request
with urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=10) as r:
    text = r.read().decode()
families = {}
for line in text.splitlines():
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ", 3)
        families[name] = kind
exported = set(families)
for name, kind in families.items():
    if kind == "histogram":
        exported |= {name + "_bucket", name + "_sum", name + "_count"}
bad = 0
for path in sys.argv[2:]:
    used = set(re.findall(r"\bomld_[a-z0-9_]*[a-z0-9]\b", open(path).read()))
    # omld_* words that are not metrics: the job/user name, file and unit names
    used -= {"omld_conf", "omld_alerts"}
    missing = sorted(n for n in used if n not in exported)
    for n in missing:
        print("%s: %s is not exported by omld's /metrics" % (path, n), file=sys.stderr)
    bad += len(missing)
    print("%s: %d metric names, all exported" % (path, len(used)) if not missing else "")
sys.exit(1 if bad else 0)
PY
kill -TERM "$pid"
wait "$pid" || true
pid=""
