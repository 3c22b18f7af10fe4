#!/bin/sh
# Checks that every file format is byte-identical between an older revision
# and the working tree: builds tests/tools/format_bytes.c against both (the
# library and the daemon core only), writes each format from the same
# inputs with each, and compares the files byte for byte.
# Usage: tests/tools/format_identity.sh [BASE_REV]   (default 7b927da, the
#        tree before issue 13 moved the codecs, with issue 11's model file
#        format 3; 1a8d103 before it writes format 2; from the repository root.
#        Since the auto start the model file is format 4 and the default's
#        init differs: against 163bd0a^ or older, model.oml and the
#        checkpoint differ by design, every other file must still match)
# Exit 0 and "identical" when every file matches, 1 with the differing files.
set -eu
cd "$(dirname "$0")/../.."
base=${1:-7b927da}
work=${FORMAT_WORK:-$PWD/build-formats}
rm -rf "$work/out-old" "$work/out-new" "$work/base"
mkdir -p "$work/base"
git archive "$base" | tar -x -C "$work/base"

libs() { # build dir -> static libraries and their dependencies, link order
    echo "$1/libomld_core.a $1/liboml_proto.a $1/liboml.a -lopenblas -lz -luv -lhttp_parser" \
         "-lprotobuf-c -lpthread -lm"
}
build() { # source dir, build dir, extra flags
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$2" -j2 --target oml oml_proto omld_core >/dev/null
    # shellcheck disable=SC2046
    cc -O2 -D_GNU_SOURCE $3 -I"$1/src" -I"$1/daemon" -I"$1/proto" -I"$2/proto" \
        tests/tools/format_bytes.c -o "$2/format_bytes" $(libs "$2")
}
build "$work/base" "$work/base-build" -DFORMAT_OLD
build "$PWD" "$work/new-build" ""
OPENBLAS_NUM_THREADS=1 "$work/base-build/format_bytes" "$work/out-old" 2>/dev/null
OPENBLAS_NUM_THREADS=1 "$work/new-build/format_bytes" "$work/out-new" 2>/dev/null
n=$(cd "$work/out-old" && find . -type f | wc -l)
if diff -r "$work/out-old" "$work/out-new"; then
    echo "identical: $n files ($(cd "$work/out-old" && find . -type f | sort | tr '\n' ' '))"
else
    echo "format_identity: the files above differ between $base and the tree" >&2
    exit 1
fi
