#!/bin/sh
# Runs the README's TLS example (the block between the tls-example markers)
# as written, in a temporary directory: the openssl and chmod lines make the
# certificate, the omld line starts the build's binary (its data directory
# and ports made temporary and ephemeral), then the omlctl line (with
# $OMLCTL_SERVER pointing at the RPC port) and the curl line (127.0.0.1:7601
# pointed at the HTTP port) must succeed over verified TLS.
# Usage: readme_tls.sh OMLD_BIN OMLCTL_BIN README
set -eu
omld_bin=$1
omlctl_bin=$2
readme=$3
# shellcheck source=tests/integration/readme_lib.sh
. "$(dirname "$0")/readme_lib.sh"

# The block, continuation lines joined.
sed -n '/<!-- tls-example -->/,/<!-- \/tls-example -->/p' "$readme" | grep -v '^```\|^<!--' |
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' >"$tmp/block"
[ -s "$tmp/block" ] || { echo "readme_tls: no tls-example block in $readme" >&2; exit 1; }
line() { grep "^$1 " "$tmp/block" | head -n 1 | sed 's/ *#.*//'; }

cd "$tmp"
eval "$(line openssl)" 2>/dev/null
eval "$(line chmod)"
omld_args=$(line ./build/omld | sed 's|^./build/omld ||; s|--data_dir [^ ]*||')
# shellcheck disable=SC2086
start_omld "$omld_bin" $omld_args

cmd=$(line omlctl | sed "s|^omlctl|\"$omlctl_bin\"|")
export OMLCTL_SERVER="$rpc"
out=$(eval "$cmd") || { echo "readme_tls: failed: $cmd" >&2; echo "$out" >&2; exit 1; }
echo "$out" | grep -q '^omld version' || { echo "readme_tls: omlctl said: $out" >&2; exit 1; }
cmd=$(line curl | sed "s|127.0.0.1:7601|$http|")
out=$(eval "$cmd") || { echo "readme_tls: failed: $cmd" >&2; exit 1; }
echo "$out" | grep -q '"tls":{"enabled":true' || { echo "readme_tls: curl said: $out" >&2; exit 1; }
echo "readme_tls: omlctl and curl verified the daemon over TLS"
