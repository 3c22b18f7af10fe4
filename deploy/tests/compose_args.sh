#!/bin/sh
# compose_args.sh OMLD COMPOSE WORKDIR
# ctest deploy_compose_args: every omld service of the compose example names
# only options omld knows, with values it accepts (omld --print-config on
# each service's command, data_dir in a temp directory), and the primary
# and the replicas agree on the Redis prefix.
set -eu
omld=$1 compose=$2
work=$(mktemp -d "$3/compose.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Each `command: [...]` line of an omld service (a JSON list), one per line.
grep -E '^    command: \["--' "$compose" | sed 's/^    command: //' >"$work/commands"
n=$(grep -c . "$work/commands")
[ "$n" -ge 3 ] || { echo "deploy_compose_args: $n omld commands in $compose, want 3" >&2; exit 1; }
i=0
while IFS= read -r list; do
    i=$((i + 1))
    python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$list" >"$work/args"
    set --
    while IFS= read -r a; do set -- "$@" "$a"; done <"$work/args"
    "$omld" "$@" --data_dir "$work/data$i" --print-config >"$work/conf$i" 2>"$work/err$i" || {
        echo "deploy_compose_args: omld refused command $i of $compose:" >&2
        cat "$work/err$i" >&2
        exit 1
    }
done <"$work/commands"
prefixes=$(grep -hoE 'redis://[^ ]+' "$work"/conf* | sort -u)
[ "$(printf '%s\n' "$prefixes" | grep -c .)" -eq 1 ] || {
    echo "deploy_compose_args: the services name different Redis streams: $prefixes" >&2; exit 1; }
grep -q '^replicate = redis://' "$work/conf1" || {
    echo "deploy_compose_args: the first omld service is not a primary (replicate)" >&2; exit 1; }
echo "deploy_compose_args: omld accepts the $n commands of $compose ($prefixes)"
