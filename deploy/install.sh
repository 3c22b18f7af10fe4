#!/bin/sh
# install.sh - build omld (Release) and install it as a service on Debian 12.
#
#   deploy/install.sh [--prefix DIR] [--build-dir DIR] [--no-build] [--dry-run]
#
# Installs omld and omlctl into PREFIX/bin (default /usr/local/bin), creates
# the system user `omld` (no login shell), /var/lib/omld (owned by it, 0750),
# /etc/omld/omld.conf from deploy/omld.conf.example unless it exists (the
# current example is always copied to /etc/omld/omld.conf.example), and the
# systemd unit /etc/systemd/system/omld.service. When systemd is running it
# reloads it and enables omld (it does not start or restart it).
#
# Idempotent: re-running upgrades the binaries and the unit and keeps the
# configuration and the data. Run it as root, with sudo, or as a user who
# can sudo: then it builds as that user and asks sudo for the install step.
# Build dependencies: deploy/install-deps.sh. Guide: deploy/README.md.
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=/usr/local
BUILD_DIR=$SRC/build-release
DO_BUILD=1
DRY=0
CONF_DIR=/etc/omld
DATA_DIR=/var/lib/omld
UNIT_DIR=/etc/systemd/system
SVC_USER=omld

usage() {
    cat <<EOF
usage: $0 [--prefix DIR] [--build-dir DIR] [--no-build] [--dry-run]

Builds omld (CMake, Release) and installs it as the systemd service omld.
  --prefix DIR     install omld and omlctl into DIR/bin (default /usr/local)
  --build-dir DIR  CMake build directory (default $SRC/build-release)
  --no-build       install the binaries already in the build directory
  --dry-run        print what would be done, change nothing (no root needed)
  -h, --help       this text

Installs: DIR/bin/omld, DIR/bin/omlctl, user '$SVC_USER', $DATA_DIR (0750),
$CONF_DIR/omld.conf (only if absent), $CONF_DIR/omld.conf.example,
$UNIT_DIR/omld.service; then systemctl daemon-reload and enable omld if
systemd is running. Start it with: systemctl start omld
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
    --prefix) [ $# -ge 2 ] || { usage >&2; exit 2; }; PREFIX=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#*=}; shift ;;
    --build-dir) [ $# -ge 2 ] || { usage >&2; exit 2; }; BUILD_DIR=$2; shift 2 ;;
    --build-dir=*) BUILD_DIR=${1#*=}; shift ;;
    --no-build) DO_BUILD=0; shift ;;
    --dry-run) DRY=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

case $PREFIX in
/*) PREFIX=${PREFIX%/} ;;
*) echo "install.sh: --prefix must be an absolute path, not '$PREFIX'" >&2; exit 2 ;;
esac
[ -n "$PREFIX" ] || PREFIX=/
case $BUILD_DIR in
/*) ;;
*) BUILD_DIR=$(pwd)/$BUILD_DIR ;;
esac
BIN_DIR=${PREFIX%/}/bin

say() { echo "install.sh: $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }
# Runs a command, or prints it with --dry-run.
run() {
    if [ "$DRY" -eq 1 ]; then
        echo "+ $*"
    else
        "$@"
    fi
}

uid=$(id -u)

# ---- build (never as root when a user called us through sudo) ----
if [ "$DO_BUILD" -eq 1 ]; then
    as_user=""
    if [ "$uid" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        as_user="sudo -u $SUDO_USER --"
    fi
    jobs=$(nproc 2>/dev/null || echo 2)
    say "building omld (Release) in $BUILD_DIR${as_user:+ as $SUDO_USER}"
    # shellcheck disable=SC2086 # as_user is a word list by design
    run $as_user cmake -S "$SRC" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
    # shellcheck disable=SC2086
    run $as_user cmake --build "$BUILD_DIR" -j"$jobs" --target omld omlctl
fi

OMLD_BIN=$BUILD_DIR/omld
OMLCTL_BIN=$BUILD_DIR/client/omlctl
if [ "$DRY" -eq 0 ]; then
    [ -x "$OMLD_BIN" ] || die "$OMLD_BIN not found: build first (drop --no-build) or give --build-dir"
    [ -x "$OMLCTL_BIN" ] || die "$OMLCTL_BIN not found: build first (drop --no-build) or give --build-dir"
fi

# ---- the install step needs root: re-run it through sudo ----
if [ "$uid" -ne 0 ] && [ "$DRY" -eq 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "installing needs root: run this as root or install sudo"
    say "installing needs root; asking sudo"
    exec sudo "$0" --no-build --build-dir "$BUILD_DIR" --prefix "$PREFIX"
fi

# ---- binaries ----
say "installing omld and omlctl into $BIN_DIR"
run install -d -m 0755 "$BIN_DIR"
run install -m 0755 "$OMLD_BIN" "$BIN_DIR/omld"
run install -m 0755 "$OMLCTL_BIN" "$BIN_DIR/omlctl"

# ---- system user ----
if getent passwd "$SVC_USER" >/dev/null 2>&1; then
    say "user $SVC_USER exists"
else
    say "creating system user $SVC_USER"
    nologin=/usr/sbin/nologin
    [ -x "$nologin" ] || nologin=/bin/false
    run useradd --system --user-group --home-dir "$DATA_DIR" --no-create-home \
        --shell "$nologin" --comment "omld metric-learning daemon" "$SVC_USER"
fi

# ---- data directory ----
say "data directory $DATA_DIR (owner $SVC_USER, 0750)"
run install -d -m 0750 -o "$SVC_USER" -g "$SVC_USER" "$DATA_DIR"

# ---- configuration ----
run install -d -m 0755 "$CONF_DIR"
run install -m 0644 "$SRC/deploy/omld.conf.example" "$CONF_DIR/omld.conf.example"
if [ -e "$CONF_DIR/omld.conf" ]; then
    say "keeping the existing $CONF_DIR/omld.conf ($CONF_DIR/omld.conf.example is the new example)"
else
    say "installing $CONF_DIR/omld.conf from the example"
    run install -m 0640 -o root -g "$SVC_USER" "$SRC/deploy/omld.conf.example" "$CONF_DIR/omld.conf"
fi
if [ "$DRY" -eq 0 ]; then
    "$BIN_DIR/omld" --config "$CONF_DIR/omld.conf" --print-config >/dev/null ||
        die "$BIN_DIR/omld refuses $CONF_DIR/omld.conf (message above); fix it, then re-run"
fi

# ---- systemd unit ----
say "installing $UNIT_DIR/omld.service"
case $BIN_DIR in
/home/* | /root/* | /run/user/*)
    say "WARNING: $BIN_DIR is hidden from the service by ProtectHome=yes; use another --prefix" ;;
esac
if [ "$DRY" -eq 1 ]; then
    echo "+ sed 's#^ExecStart=/usr/local/bin/omld #ExecStart=$BIN_DIR/omld #' $SRC/deploy/omld.service > $UNIT_DIR/omld.service"
else
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    sed "s#^ExecStart=/usr/local/bin/omld #ExecStart=$BIN_DIR/omld #" "$SRC/deploy/omld.service" >"$tmp"
    install -d -m 0755 "$UNIT_DIR"
    install -m 0644 "$tmp" "$UNIT_DIR/omld.service"
fi

# ---- systemd, if it is running (sd_booted: /run/systemd/system exists) ----
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    run systemctl daemon-reload
    run systemctl enable omld.service
    if systemctl is-active --quiet omld.service 2>/dev/null; then
        say "done. omld is running the previous binary: restart it with: systemctl restart omld"
    else
        say "done. Start omld with: systemctl start omld   (status: systemctl status omld)"
    fi
else
    say "systemd is not running (PID 1 is $(ps -o comm= -p 1 2>/dev/null || echo unknown)): unit installed, not enabled"
    say "done. Run omld by hand with: runuser -u $SVC_USER -- $BIN_DIR/omld --config $CONF_DIR/omld.conf"
fi
