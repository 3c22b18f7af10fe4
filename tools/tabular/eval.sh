#!/bin/sh
# Standardised kNN, the default's start and the default after 10 random
# triplets per dev item, on every CSV in DIR (the README's tabular table).
# Usage: tools/tabular/eval.sh DIR [BUILD [OML-EVAL ARGS...]]   (DIR from
# make_data.R; needs Debian's r-cran-mlbench and python3-sklearn to make
# it; the arguments go to the learning runs, e.g. --preset wide)
set -eu
dir=$1
build=${2:-build}
shift $(( $# < 2 ? $# : 2 ))
seed=1 # the std reference splits as the learning runs do
prev=
for a in "$@"; do
    [ "$prev" = --seed ] && seed=$a
    prev=$a
done
for f in "$dir"/*.csv; do
    n=$(grep -c . "$f")
    per_item=$(( 10 * ((n + 1) / 2) ))
    std=$("$build"/oml-eval --csv "$f" --method std --seed "$seed" | tail -1 | grep -o '"error_rate":[0-9.]*')
    curve=$("$build"/oml-eval --csv "$f" --stream random --curve "0,$per_item" "$@" | tail -1 |
            grep -o '"curve":\[[^]]*\]')
    echo "$(basename "$f" .csv) items=$n std $std $curve"
done
