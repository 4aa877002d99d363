#!/usr/bin/env bash
# Regenerates include/fcan.h from src/ with cbindgen. `--check`: fail (and show the
# difference) when the committed header is not what src/ generates.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
command -v cbindgen >/dev/null || {
    echo "cbindgen not found: cargo install cbindgen --locked --version 0.29.4" >&2
    exit 1
}
out="$here/include/fcan.h"
if [ "${1:-}" = "--check" ]; then
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    cbindgen --quiet --config "$here/cbindgen.toml" --output "$tmp" "$here"
    if ! diff -u "$out" "$tmp"; then
        echo "include/fcan.h is not what src/ generates: run fcan-node-c/scripts/header.sh and commit it" >&2
        exit 1
    fi
    echo "include/fcan.h matches src/"
else
    cbindgen --quiet --config "$here/cbindgen.toml" --output "$out" "$here"
    echo "wrote $out"
fi
