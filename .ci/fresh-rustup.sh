#!/usr/bin/env bash
# Usage: .ci/fresh-rustup.sh DIR
#
# Makes DIR a rustup home as the README's test command meets it on a machine where the
# toolchain rust-toolchain.toml pins is already installed but without the thumb targets
# the file names: rustup installs a toolchain file's targets only with a toolchain it
# installs itself, so there `cargo test --workspace` must add them itself (fcan-codegen's
# compile test does) or say what to run. Run cargo with RUSTUP_HOME=DIR to meet it.
#
# DIR holds a copy of the pinned toolchain only (the real directory behind it: here it is
# a symlink to stable), settings.toml and update-hashes; the thumb targets are then
# removed from the copy with rustup itself. The real rustup home is checked unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${1:?usage: .ci/fresh-rustup.sh DIR}
[ ! -e "$dest" ] || { echo "fresh-rustup: $dest exists" >&2; exit 1; }
home=${RUSTUP_HOME:-$HOME/.rustup}
channel=$(sed -n 's/^channel *= *"\(.*\)"$/\1/p' rust-toolchain.toml)
thumbs=(thumbv7em-none-eabihf thumbv6m-none-eabi)
host=$(rustc +"$channel" -vV | sed -n 's/^host: //p')
name=$channel-$host
src=$(readlink -f "$(rustc +"$channel" --print sysroot)")
[ -d "$src/lib/rustlib" ] || { echo "fresh-rustup: no toolchain at $src" >&2; exit 1; }

# What must not change in the real home: its targets, the files rustup rewrites, and the
# thumb targets' files where it has them (the copy's are links to them).
real_state() {
    rustup target list --installed --toolchain "$channel"
    (cd "$src/lib/rustlib" && find . -maxdepth 1 -type f -exec md5sum {} + | sort)
    (cd "$src/lib/rustlib" && find "${thumbs[@]}" -type f -exec md5sum {} + 2>/dev/null | sort) || true
}
before=$(real_state)

mkdir -p "$dest/toolchains"
copy=$dest/toolchains/$name
# Hard links where the filesystem allows (1.4 GB, most of it the docs, not written twice),
# else a full copy. rustup only unlinks files it removes and writes new ones it adds,
# except the lists directly in lib/rustlib/ (components, multirust-config.toml, the
# manifests), which it rewrites in place: those are always real copies, so nothing it
# does in DIR reaches the real home (checked below).
if cp -al "$src" "$copy" 2>/dev/null; then
    for f in "$copy"/lib/rustlib/*; do
        [ -f "$f" ] || continue
        cp --remove-destination "$src/lib/rustlib/${f##*/}" "$f"
    done
    how="hard links, lib/rustlib/'s files copied"
else
    rm -rf "$copy"
    cp -a "$src" "$copy"
    how="a full copy"
fi
cp "$home/settings.toml" "$dest/"
[ ! -d "$home/update-hashes" ] || cp -a "$home/update-hashes" "$dest/"

# Those of them the copy has (all, when the real home has them, as in CI after the
# toolchain step): rustup refuses to remove a target that is not there.
had=$(RUSTUP_HOME=$dest rustup target list --installed --toolchain "$channel")
remove=()
for t in "${thumbs[@]}"; do
    if grep -qx "$t" <<<"$had"; then remove+=("$t"); fi
done
if [ ${#remove[@]} -gt 0 ]; then
    RUSTUP_HOME=$dest rustup target remove --toolchain "$channel" "${remove[@]}" 2>&1 | sed 's/^/  /'
fi

installed=$(RUSTUP_HOME=$dest rustup target list --installed --toolchain "$channel")
for t in "${thumbs[@]}"; do
    if grep -qx "$t" <<<"$installed"; then
        echo "fresh-rustup: $t still installed in $dest" >&2
        exit 1
    fi
    if [ -e "$copy/lib/rustlib/$t" ]; then
        echo "fresh-rustup: $copy/lib/rustlib/$t still there" >&2
        exit 1
    fi
done
if [ "$(real_state)" != "$before" ]; then
    echo "fresh-rustup: the real rustup home ($src) changed" >&2
    exit 1
fi
echo "  $dest: $name ($how) without ${thumbs[*]}; installed there: $(echo $installed)"
