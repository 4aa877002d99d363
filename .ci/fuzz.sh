#!/usr/bin/env bash
# Smoke-runs every fuzz target for a few seconds from its committed seeds: the harnesses
# build, the seeds still pass, and a short mutation run finds nothing. Long runs are done
# by hand (docs/fuzzing.md); this catches a harness or a fix that broke.
#
# Builds with `--dev -s none` (no optimisation, no sanitizer; debug assertions and
# overflow checks stay on): compiling the four fuzz workspaces is the cost of this step,
# and one shared target directory builds fcan-core and the fuzzing runtime once.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FCAN_FUZZ_SECONDS:-5}

if ! cargo +nightly --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

target_dir="$PWD/target/fuzz"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run CRATE_DIR TARGET [SEED_DIR]: new inputs go to a scratch corpus (libFuzzer writes
# into the first directory), so the committed seeds stay as they are.
run() {
    local dir=$1 target=$2 seeds=${3:-}
    local corpus="$work/corpus-$target" log="$work/$target.log"
    mkdir -p "$corpus"
    local args=("$target" "$corpus")
    if [ -n "$seeds" ]; then args+=("$seeds"); fi
    if (cd "$dir" && cargo +nightly fuzz run --dev -s none --target-dir "$target_dir" \
        "${args[@]}" -- -max_total_time="$secs" -print_final_stats=1) >"$log" 2>&1; then
        printf '%-16s %s executions in %s s\n' "$target" \
            "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" "$secs"
    else
        tail -n 60 "$log"
        echo "fuzz target $target failed (input saved under $dir/fuzz/artifacts/$target/)"
        return 1
    fi
}

run fcan-core config_message fuzz/seeds/config_message
run fcan-core blob fuzz/seeds/blob
run fcan-core reassembly
run fcan-core scalar_pack
run fcan-runtime-nostd node_frames fuzz/seeds/node_frames
run fcan-runtime-nostd node_update fuzz/seeds/node_update
run fcan-master engine_frames fuzz/seeds/engine_frames
run fcan-ros2 dds_samples fuzz/seeds/dds_samples
run fcan-drivers device_frames fuzz/seeds/device_frames
