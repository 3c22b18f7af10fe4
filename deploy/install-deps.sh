#!/bin/sh
# Installs every build, test and evaluation dependency of omld on Debian 12.
# Idempotent: packages already present are skipped by apt-get; safe to re-run.
set -eu

PKGS="build-essential cmake pkg-config
libopenblas-dev libcmocka-dev libuv1-dev zlib1g-dev libsystemd-dev
libprotobuf-c-dev protobuf-c-compiler libhttp-parser-dev libjansson-dev libhiredis-dev redis-server
libssl-dev openssl
python3-protobuf python3-numpy protobuf-compiler python3-pip python3-venv
prometheus shellcheck curl
chromium clang libclang-rt-14-dev
dataset-fashion-mnist"

# Node.js for the dashboard test and the Node.js client: Debian's nodejs +
# npm, unless a node and npm are already there (e.g. NodeSource's nodejs,
# which bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

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

# The dashboard test drives Chromium with playwright-core (pinned in
# tests/dashboard/package-lock.json; 1.x that runs on Debian 12's Node 18).
# The Node.js client (client/node) needs protobufjs (pinned in its
# package-lock.json; runs on Node 18).
here=$(cd "$(dirname "$0")/.." && pwd)
for dir_module in tests/dashboard:playwright-core client/node:protobufjs; do
    dir=${dir_module%%:*}
    if [ ! -d "$here/$dir/node_modules/${dir_module#*:}" ]; then
        echo "install-deps: npm ci --prefix $dir"
        npm ci --prefix "$here/$dir" --no-audit --no-fund >/dev/null
    fi
done
