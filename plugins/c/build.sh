#!/usr/bin/env bash
# Builds the C example plugins into components:
#   OUT_DIR/c-echo.wasm       (world deployer-plugin, plugins/c/echo)
#   OUT_DIR/c-hold-hook.wasm  (world hook-plugin,     plugins/c/hold-hook)
#   OUT_DIR/c-http-api.wasm   (world deployer-plugin, plugins/c/http-api: wasi:http)
#
# Usage: plugins/c/build.sh OUT_DIR
#
# Toolchain (see docs/plugins/c.md):
# - Debian bookworm packages `clang lld wasi-libc libclang-rt-dev-wasm32` (clang 14, wasm-ld,
#   the wasm32-wasi sysroot under /usr, compiler-rt builtins). Missing ones are installed with
#   apt-get when running as root, except with CI=true, where that is an error.
# - `c-componentize` (workspace crate sdk-guest/c/componentize: wit-bindgen-c 0.63.0 +
#   wit-component + the wasmtime 48.0.8 preview1 reactor adapter), built with
#   `cargo build -p c-componentize` into the workspace target dir. With CI=true it is not
#   built here: it must exist already. C_COMPONENTIZE=/path overrides it.
# Nothing of the C toolchain lives under $TOOLCHAINS (default <repo>/target/guest-toolchains):
# it only holds the lock that serialises installs.
#
# An output newer than its inputs (plugin sources, sdk-guest/c, wit/, c-componentize) is left
# alone. Quiet on success.
set -euo pipefail

APT_PACKAGES="clang lld wasi-libc libclang-rt-dev-wasm32"
CFLAGS=(--target=wasm32-wasi --sysroot=/usr -Os -mexec-model=reactor -std=c11
        -Wall -Wextra -Werror -Wno-unused-parameter)
LDFLAGS=(-Wl,--strip-all)  # keeps the component-type custom section; 183 KB -> 72 KB

die() { echo "plugins/c/build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUT_DIR"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLCHAINS=${TOOLCHAINS:-$REPO/target/guest-toolchains}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
WIT=$REPO/wit
SDK=$REPO/sdk-guest/c
mkdir -p "$1"
OUT=$(cd "$1" && pwd)

# --- clang + wasm32-wasi sysroot -------------------------------------------------------------
have_clang() {
    command -v clang >/dev/null && command -v wasm-ld >/dev/null &&
        [ -f /usr/include/wasm32-wasi/stdio.h ] &&
        compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" >/dev/null
}
if ! have_clang; then
    how="apt-get install -y $APT_PACKAGES"
    [ "${CI:-}" != "true" ] || die "the C toolchain is missing (CI=true: not installing). Install it with:  $how"
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "the C toolchain is missing. Install it with:  sudo $how"
    mkdir -p "$TOOLCHAINS"
    exec 9>"$TOOLCHAINS/.c-apt.lock"
    flock 9
    if ! have_clang; then
        log=$(mktemp)
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $APT_PACKAGES; } >"$log" 2>&1; then
            cat "$log" >&2; rm -f "$log"
            die "installing $APT_PACKAGES failed"
        fi
        rm -f "$log"
        have_clang || die "the C toolchain is still incomplete after installing $APT_PACKAGES"
    fi
    exec 9>&-
fi

# --- c-componentize --------------------------------------------------------------------------
if [ -n "${C_COMPONENTIZE:-}" ]; then
    CC_TOOL=$C_COMPONENTIZE
elif [ "${CI:-}" = "true" ]; then
    CC_TOOL=$TARGET_DIR/debug/c-componentize
    [ -x "$CC_TOOL" ] || CC_TOOL=$TARGET_DIR/release/c-componentize
    [ -x "$CC_TOOL" ] || die "c-componentize not found in $TARGET_DIR/{debug,release} (CI=true: not building). Build it with:  cargo build -p c-componentize"
else
    # A no-op when it is up to date (the binary's mtime then stays put).
    (cd "$REPO" && cargo build -q -p c-componentize) || die "cargo build -p c-componentize failed"
    CC_TOOL=$TARGET_DIR/debug/c-componentize
fi
[ -x "$CC_TOOL" ] || die "c-componentize not found at $CC_TOOL"

# build NAME WORLD SRC_DIR: SRC_DIR/*.c + sdk-guest/c -> OUT/NAME.wasm
build() {
    local name=$1 world=$2 src=$3 out="$OUT/$1.wasm"
    if [ -f "$out" ] && [ -z "$(find "$src" "$SDK" "$WIT" "$CC_TOOL" -newer "$out" \
            -not -path '*/examples/*' -not -path "$SDK/componentize/*" -not -path "$SDK/tests/*" -print -quit)" ]; then
        return 0  # up to date
    fi
    local stage log
    stage=$(mktemp -d)
    log=$stage/log
    if ! { "$CC_TOOL" bindgen --wit "$WIT" --world "$world" --out "$stage/gen" --rename-world wd_wit &&
           clang "${CFLAGS[@]}" -I "$stage/gen" -I "$SDK" "${LDFLAGS[@]}" -o "$stage/core.wasm" \
               "$src"/*.c "$SDK/wasm_deployer.c" "$stage/gen/wd_wit.c" "$stage/gen/wd_wit_component_type.o" &&
           "$CC_TOOL" new "$stage/core.wasm" -o "$stage/$name.wasm"; } >"$log" 2>&1; then
        cat "$log" >&2; rm -rf "$stage"
        die "building $name from $src failed"
    fi
    mv -f "$stage/$name.wasm" "$out"
    rm -rf "$stage"
}

build c-echo deployer-plugin "$HERE/echo"
build c-hold-hook hook-plugin "$HERE/hold-hook"
build c-http-api deployer-plugin "$HERE/http-api"
