#!/bin/sh
# Runs the README's curl examples (the block between the curl-examples
# markers) against a real omld: the `omld` line is started with the build's
# binary in a temporary data directory on ephemeral ports, every `curl`
# command runs as written (its localhost:7601 pointed at that port) and must
# answer HTTP 200 with status OK.
# Usage: readme_curl.sh OMLD_BIN README
set -eu
omld_bin=$1
readme=$2
# shellcheck source=tests/integration/readme_lib.sh
. "$(dirname "$0")/readme_lib.sh"

# The block, with continuation lines (a curl body over several lines) joined.
sed -n '/<!-- curl-examples -->/,/<!-- \/curl-examples -->/p' "$readme" | grep -v '^```\|^<!--' >"$tmp/block"
[ -s "$tmp/block" ] || { echo "readme_curl: no curl-examples block in $readme" >&2; exit 1; }

omld_args=$(grep '^omld ' "$tmp/block" | head -n 1 | sed 's/^omld //; s/ *&$//; s|--data_dir [^ ]*||')
# shellcheck disable=SC2086
start_omld "$omld_bin" $omld_args

# One command per curl line, with the lines that continue its quoted body.
awk '/^curl /{ if (cmd != "") print cmd; cmd = $0; next } cmd != "" && !/^omld /{ cmd = cmd " " $0 } END { if (cmd != "") print cmd }' \
    "$tmp/block" >"$tmp/commands"
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    cmd=$(printf '%s' "$cmd" | sed "s|localhost:7601|$http|g")
    out=$(eval "$cmd -w ' HTTP=%{http_code}'")
    case $out in
    *'"code":"OK"'*' HTTP=200') printf 'readme_curl: %d ok: %.100s\n' "$n" "$out" ;;
    *) echo "readme_curl: example $n failed: $cmd" >&2; echo "$out" >&2; exit 1 ;;
    esac
    sleep 0.3 # the examples read what the ones before wrote: let the view follow
done <"$tmp/commands"
[ "$n" -ge 5 ] || { echo "readme_curl: only $n curl examples" >&2; exit 1; }
echo "readme_curl: $n examples answered OK"
