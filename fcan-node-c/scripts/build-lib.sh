#!/usr/bin/env bash
# Builds libfcan_node.a, the fcan node runtime for C, for every target a release ships
# and lays out what a C team gets:
#
#   DIR/include/fcan.h
#   DIR/lib/<rust-target>/libfcan_node.a          the node runtime
#   DIR/lib/<rust-target>/libfcan_node_update.a   the same with firmware updates over the
#                                                 bus (define FCAN_UPDATE when including fcan.h)
#
#   fcan-node-c/scripts/build-lib.sh [--out DIR] [--target T]...
#
# DIR defaults to target/fcan-c. Without --target: every shipped target (below) and the
# host; `--target host` means the host's triple. Missing rustup targets are added (with a
# NOTE); without rustup the script stops and prints the command that would add them.
# Each archive must define every function fcan.h declares, or the script fails here
# rather than in a C team's link.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

# What a release ships: Cortex-M0/M0+, M3, M4/M7 without and with FPU, M33/M55 with FPU,
# RISC-V microcontrollers (ESP32-C3/C6, GD32VF103, CH32V), and the host (tests, Linux
# nodes). The host is added below.
SHIPPED=(
    thumbv6m-none-eabi
    thumbv7m-none-eabi
    thumbv7em-none-eabi
    thumbv7em-none-eabihf
    thumbv8m.main-none-eabihf
    riscv32imac-unknown-none-elf
)

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

out="$root/target/fcan-c"
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out)
            [ $# -ge 2 ] || { usage >&2; exit 2; }
            out="$2"
            shift 2
            ;;
        --out=*) out="${1#--out=}"; shift ;;
        --target)
            [ $# -ge 2 ] || { usage >&2; exit 2; }
            targets+=("$2")
            shift 2
            ;;
        --target=*) targets+=("${1#--target=}"); shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "build-lib.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"

host="$(rustc -vV | sed -n 's/^host: //p')"
[ -n "$host" ] || { echo "build-lib.sh: cannot tell the host triple (rustc -vV)" >&2; exit 1; }
if [ ${#targets[@]} -eq 0 ]; then
    targets=("${SHIPPED[@]}" "$host")
fi
for i in "${!targets[@]}"; do
    [ "${targets[$i]}" = host ] && targets[$i]="$host"
done

# Rust's standard library for each target: rustup adds what is missing; without rustup
# the toolchain must already have it.
missing=()
if command -v rustup >/dev/null; then
    installed="$(rustup target list --installed)"
    for t in "${targets[@]}"; do
        grep -qxF "$t" <<<"$installed" || missing+=("$t")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "NOTE: adding rustup targets: ${missing[*]}"
        rustup target add "${missing[@]}"
    fi
else
    sysroot="$(rustc --print sysroot)"
    for t in "${targets[@]}"; do
        [ -d "$sysroot/lib/rustlib/$t/lib" ] || missing+=("$t")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "build-lib.sh: the Rust toolchain has no standard library for: ${missing[*]}" >&2
        echo "  with rustup: rustup target add ${missing[*]}" >&2
        exit 1
    fi
fi

# The functions fcan.h declares: every archive must define each of them.
header="$here/include/fcan.h"
# The functions each archive must define: what the header declares, through the C
# preprocessor (the update API is under #if defined(FCAN_UPDATE)).
declared() {
    cc -E -P -x c "$@" "$header" |
        sed -n 's/^[A-Za-z_][A-Za-z0-9_ *]*[ *]\(fcan_[a-z0-9_]*\)(.*/\1/p' | sort -u
}
mapfile -t api < <(declared)
mapfile -t api_update < <(declared -DFCAN_UPDATE)
if [ ${#api[@]} -lt 10 ] || ! printf '%s\n' "${api[@]}" | grep -qx fcan_node_init; then
    echo "build-lib.sh: found only ${#api[@]} functions in $header (${api[*]}): the header's format changed?" >&2
    exit 1
fi

# readelf reads the archives' symbol tables directly: `nm` from binutils hands objects
# with embedded LLVM bitcode (Rust's compiler_builtins) to the LTO plugin, which fails on
# a newer LLVM's bitcode and then lists no symbols for them.
readelf=""
for r in readelf llvm-readelf arm-none-eabi-readelf; do
    if command -v "$r" >/dev/null; then readelf="$r"; break; fi
done
[ -n "$readelf" ] || { echo "build-lib.sh: needs readelf (binutils) or llvm-readelf to check the archives" >&2; exit 1; }

mkdir -p "$out/include" "$out/lib"
cp "$header" "$out/include/fcan.h"

# check_archive T A: every API function is a global, default-visibility function in A;
# prints what A still needs from the C library (symbols its fcan object uses that no
# member defines).
check_archive() {
    local t=$1 a=$2 syms defined missing_api needs
    local -a want=("${api[@]}")
    [ "${3:-}" = update ] && want=("${api_update[@]}")
    # (readelf fails on a member that is not ELF; what it did read still counts)
    syms="$("$readelf" -sW "$a" 2>/dev/null || true)"
    defined="$(awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") {print $8}' <<<"$syms" | sort -u)"
    missing_api=()
    for f in "${want[@]}"; do
        awk -v f="$f" '$4 == "FUNC" && $5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND" && $8 == f {found = 1} END {exit !found}' <<<"$syms" \
            || missing_api+=("$f")
    done
    if [ ${#missing_api[@]} -gt 0 ]; then
        echo "build-lib.sh: $a does not define: ${missing_api[*]}" >&2
        return 1
    fi
    # Undefined symbols of the runtime's own object(s) (fcan_node-*.o), not defined by
    # any member: what the image must provide.
    needs="$(awk '
        /^File: / { mine = ($2 ~ /\(fcan_node-[^)]*\.o\)$/) ; next }
        mine && $7 == "UND" && $8 != "" { print $8 }' <<<"$syms" | sort -u | comm -23 - <(printf '%s\n' "$defined"))"
    needs="$(echo $needs)"
    echo "  $(basename "$a") for $t: defines all ${#want[@]} functions of fcan.h${3:+ (with FCAN_UPDATE)}; needs from the C library: ${needs:-nothing}"
}

# code_bytes A: bytes of code and read-only data the runtime's object contributes (an
# upper bound of what it adds to flash: the linker drops unused sections).
code_bytes() {
    local sum=0 hex
    while read -r hex; do
        sum=$((sum + 16#$hex))
    done < <("$readelf" -SW "$1" 2>/dev/null | awk '
        /^File: / { mine = ($2 ~ /\(fcan_node-[^)]*\.o\)$/); next }
        mine && /^ *\[ *[0-9]+\]/ {
            sub(/^ *\[ *[0-9]+\] */, "")
            # Name Type Address Off Size ES Flg ...
            if ($2 == "PROGBITS" && $7 ~ /A/ && $7 !~ /W/) print $5
        }')
    echo "$sum"
}

summary=()
for t in "${targets[@]}"; do
    mkdir -p "$out/lib/$t"
    src="$root/target/$t/c-lib/libfcan_node.a"
    echo "==> libfcan_node_update.a for $t"
    cargo rustc -p fcan-node-c --crate-type staticlib --features panic-handler,update \
        --profile c-lib --target "$t"
    [ -f "$src" ] || { echo "build-lib.sh: cargo built no $src" >&2; exit 1; }
    cp "$src" "$out/lib/$t/libfcan_node_update.a"
    echo "==> libfcan_node.a for $t"
    cargo rustc -p fcan-node-c --crate-type staticlib --features panic-handler \
        --profile c-lib --target "$t"
    cp "$src" "$out/lib/$t/libfcan_node.a"
    size=$(stat -c %s "$out/lib/$t/libfcan_node.a")
    code=$(code_bytes "$out/lib/$t/libfcan_node.a")
    summary+=("$(printf '  %-30s archive %5d KiB   runtime code+rodata %4d KiB' "$t" $(((size + 1023) / 1024)) $(((code + 1023) / 1024)))")
done

echo
echo "==> archives"
printf '%s\n' "${summary[@]}"
echo
echo "==> symbols"
for t in "${targets[@]}"; do
    check_archive "$t" "$out/lib/$t/libfcan_node.a"
    check_archive "$t" "$out/lib/$t/libfcan_node_update.a" update
done
echo
echo "A C team needs: -I $out/include and the one archive $out/lib/<target>/libfcan_node.a"
echo "(nothing else: no Rust toolchain, no other library; the CMake and make integration is"
echo "in fcan-node-c/cmake/fcan.cmake and fcan-node-c/make/fcan.mk)."
