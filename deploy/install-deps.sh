#!/bin/sh
# Installs every build, test and evaluation dependency of omld on Debian 12.
# Idempotent: packages already present are skipped by apt-get; safe to re-run.
set -eu

PKGS="build-essential cmake pkg-config
libopenblas-dev libcmocka-dev libuv1-dev zlib1g-dev
libprotobuf-c-dev protobuf-c-compiler libhttp-parser-dev
python3-protobuf protobuf-compiler
prometheus shellcheck
dataset-fashion-mnist"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "install-deps: installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-deps: all dependencies present"
fi
