#!/bin/sh
# unit_verify.sh UNIT OMLD WORKDIR
# ctest deploy_unit_verify: `systemd-analyze verify` on a copy of the unit
# whose ExecStart points at the built binary (verify needs it to exist).
# Any warning fails the test, not only errors.
set -eu
unit=$1 omld=$2
work=$(mktemp -d "$3/verify.XXXXXX")
trap 'rm -rf "$work"' EXIT
grep -q '^ExecStart=/usr/local/bin/omld ' "$unit" || {
    echo "deploy_unit_verify: $unit has no 'ExecStart=/usr/local/bin/omld ' line" >&2; exit 1; }
sed "s#^ExecStart=/usr/local/bin/omld #ExecStart=$omld #" "$unit" >"$work/omld.service"
rc=0
SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$work/omld.service" >"$work/out" 2>&1 || rc=$?
# Lines about other units on this machine (e.g. a broken unit in /etc) are not ours.
grep -v -e '^$' "$work/out" | grep "omld.service" >"$work/ours" || true
cat "$work/out"
if [ "$rc" -ne 0 ] || [ -s "$work/ours" ]; then
    echo "deploy_unit_verify: systemd-analyze verify failed (status $rc)" >&2
    exit 1
fi
echo "deploy_unit_verify: systemd-analyze verify accepts $unit"
