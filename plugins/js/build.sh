#!/usr/bin/env bash
# Builds the JavaScript example plugins into components:
#   OUT_DIR/js-echo.wasm       (world deployer-plugin, plugins/js/echo)
#   OUT_DIR/js-hold-hook.wasm  (world hook-plugin,     plugins/js/hold-hook)
#   OUT_DIR/js-http-api.wasm   (world deployer-plugin, plugins/js/http-api: fetch() over wasi:http)
#
# Usage: plugins/js/build.sh OUT_DIR
#
# Toolchain: npm @bytecodealliance/componentize-js (pinned, with its whole dependency tree, by
# sdk-guest/js/toolchain/package-lock.json) under $TOOLCHAINS/js (default TOOLCHAINS:
# <repo>/target/guest-toolchains), driven by sdk-guest/js/componentize.mjs (the componentize()
# API; the `jco componentize` CLI cannot read the WIT directory). Needs node >= 18 and npm. A
# missing or different toolchain is installed with `npm ci`, except with CI=true, where it is
# an error. An output newer than its inputs (plugin sources, sdk-guest/js, wit/, the lock file)
# is left alone. Quiet on success.
set -euo pipefail

COMPONENTIZE_JS_VERSION=0.23.0

die() { echo "plugins/js/build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUT_DIR"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLCHAINS=${TOOLCHAINS:-$REPO/target/guest-toolchains}
TC=$TOOLCHAINS/js
SDK=$REPO/sdk-guest/js
PIN=$SDK/toolchain
WIT=$REPO/wit
mkdir -p "$1"
OUT=$(cd "$1" && pwd)

command -v node >/dev/null || die "node (>= 18) is needed (Debian: apt-get install nodejs npm)"
[ "$(node -p 'process.versions.node.split(".")[0] >= 18')" = true ] ||
    die "node >= 18 is needed, found $(node --version)"

have_toolchain() {
    cmp -s "$PIN/package.json" "$TC/package.json" &&
        cmp -s "$PIN/package-lock.json" "$TC/package-lock.json" &&
        [ "$(node -p 'require(process.argv[1]).version' \
            "$TC/node_modules/@bytecodealliance/componentize-js/package.json" 2>/dev/null)" = "$COMPONENTIZE_JS_VERSION" ]
}

if ! have_toolchain; then
    if [ "${CI:-}" = "true" ]; then
        die "componentize-js $COMPONENTIZE_JS_VERSION not found under $TC (CI=true: not installing).
Install it with:  mkdir -p $TC && cp $PIN/package.json $PIN/package-lock.json $TC/ && (cd $TC && npm ci)"
    fi
    command -v npm >/dev/null || die "npm is needed to install the toolchain into $TC"
    mkdir -p "$TC"
    # One installer at a time (parallel builds share the toolchain directory).
    exec 9>"$TOOLCHAINS/.js.lock"
    flock 9
    if ! have_toolchain; then
        log=$(mktemp)
        cp "$PIN/package.json" "$PIN/package-lock.json" "$TC/"
        if ! (cd "$TC" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
            cat "$log" >&2; rm -f "$log"
            rm -f "$TC/package-lock.json"  # not "installed": the next run tries again
            die "installing componentize-js $COMPONENTIZE_JS_VERSION into $TC failed (npm ci)"
        fi
        rm -f "$log"
        have_toolchain || die "$TC does not hold componentize-js $COMPONENTIZE_JS_VERSION after npm ci"
    fi
    exec 9>&-
fi

# build NAME WORLD SRC_DIR: SRC_DIR/plugin.js (+ the helper it imports) -> OUT/NAME.wasm
build() {
    local name=$1 world=$2 src=$3 out="$OUT/$1.wasm"
    if [ -f "$out" ] && [ -z "$(find "$src" "$SDK" "$WIT" "$TC/package-lock.json" -newer "$out" \
            -not -path '*/examples/*' -not -path "$PIN/*" -print -quit)" ]; then
        return 0  # up to date
    fi
    local log
    log=$(mktemp)
    # --root $REPO: the plugin imports the helper as ../../../sdk-guest/js/*.js, and
    # componentize-js only lets the module loader see files below that root.
    if ! node "$SDK/componentize.mjs" --toolchain "$TC" --wit "$WIT" --world "$world" --root "$REPO" \
            "$src/plugin.js" "$out" >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"
        die "building $name from $src failed"
    fi
    rm -f "$log"
}

build js-echo deployer-plugin "$HERE/echo"
build js-hold-hook hook-plugin "$HERE/hold-hook"
build js-http-api deployer-plugin "$HERE/http-api"
