#!/usr/bin/env bash
# Builds the Python example plugins into components:
#   OUT_DIR/python-echo.wasm       (world deployer-plugin, plugins/python/echo)
#   OUT_DIR/python-hold-hook.wasm  (world hook-plugin,     plugins/python/hold-hook)
#   OUT_DIR/python-http-api.wasm   (world deployer-plugin, plugins/python/http-api: wasm_deployer.http)
#
# Usage: plugins/python/build.sh OUT_DIR
#
# Toolchain: componentize-py (pinned below) in a venv under $TOOLCHAINS/python-venv
# (default TOOLCHAINS: <repo>/target/guest-toolchains). A missing or wrong toolchain is
# installed from PyPI, except with CI=true, where it is an error. An output that is newer than
# its inputs (plugin sources, sdk-guest/python, wit/, toolchain) is left alone. Quiet on success.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

die() { echo "plugins/python/build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUT_DIR"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLCHAINS=${TOOLCHAINS:-$REPO/target/guest-toolchains}
VENV=$TOOLCHAINS/python-venv
CPY=$VENV/bin/componentize-py
WIT=$REPO/wit
SDK=$REPO/sdk-guest/python
mkdir -p "$1"
OUT=$(cd "$1" && pwd)

have_toolchain() {
    [ -x "$CPY" ] && [ "$("$CPY" --version 2>/dev/null)" = "componentize-py $COMPONENTIZE_PY_VERSION" ]
}

if ! have_toolchain; then
    if [ "${CI:-}" = "true" ]; then
        die "componentize-py $COMPONENTIZE_PY_VERSION not found at $CPY (CI=true: not installing).
Install it with:  python3 -m venv $VENV && $VENV/bin/pip install componentize-py==$COMPONENTIZE_PY_VERSION"
    fi
    command -v python3 >/dev/null || die "python3 is needed to create $VENV"
    mkdir -p "$TOOLCHAINS"
    # One installer at a time (parallel builds share the toolchain directory).
    exec 9>"$TOOLCHAINS/.python-venv.lock"
    flock 9
    if ! have_toolchain; then
        log=$(mktemp)
        if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install --quiet --disable-pip-version-check \
                "componentize-py==$COMPONENTIZE_PY_VERSION"; } >"$log" 2>&1; then
            cat "$log" >&2; rm -f "$log"
            die "installing componentize-py $COMPONENTIZE_PY_VERSION into $VENV failed"
        fi
        rm -f "$log"
        have_toolchain || die "$CPY does not report version $COMPONENTIZE_PY_VERSION after installing"
    fi
    exec 9>&-
fi

# build NAME WORLD SRC_DIR: SRC_DIR/app.py + sdk-guest/python -> OUT/NAME.wasm
build() {
    local name=$1 world=$2 src=$3 out="$OUT/$1.wasm"
    if [ -f "$out" ] && [ -z "$(find "$src" "$SDK" "$WIT" "$CPY" -newer "$out" \
            -not -path '*/__pycache__*' -not -path '*/examples/*' -print -quit)" ]; then
        return 0  # up to date
    fi
    # componentize-py writes __pycache__ into the directories it reads: build from a copy.
    local stage
    stage=$(mktemp -d)
    cp -R "$src" "$stage/app" && cp -R "$SDK" "$stage/sdk"
    rm -rf "$stage/app/examples"
    local log="$stage/log"
    # VIRTUAL_ENV: componentize-py then searches the toolchain venv's site-packages instead of
    # whatever python3 is on PATH (only imported modules end up in the component).
    if ! VIRTUAL_ENV=$VENV "$CPY" -q -d "$WIT" -w "$world" componentize app \
            -p "$stage/app" -p "$stage/sdk" -o "$stage/$name.wasm" >"$log" 2>&1; then
        cat "$log" >&2; rm -rf "$stage"
        die "building $name from $src failed"
    fi
    mv -f "$stage/$name.wasm" "$out"
    rm -rf "$stage"
}

build python-echo deployer-plugin "$HERE/echo"
build python-hold-hook hook-plugin "$HERE/hold-hook"
build python-http-api deployer-plugin "$HERE/http-api"
