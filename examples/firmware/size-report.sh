#!/usr/bin/env bash
# Size report of the eight-motor firmware (thumbv7em-none-eabihf, release: opt-level "s",
# fat LTO, codegen-units 1, panic abort), built WITHOUT the self-test master
# (`--no-default-features`): node + application + mailbox driver + startup, the main loop
# reading the controller. Then the same with the receive interrupt feeding the node
# through the runtime's `Mailbox` (`--features irq-receive`), and with firmware updates
# over the bus (`--features update`: the runtime's update state machine, SHA-256, the
# staging area's code), whose costs are printed (neither counts against the budget).
#
# Fails (exit 1) when the node is above its budget: runtime + fcan-core + generated code
# (+ heapless) over 16 KiB of flash, the node over 4 KiB of RAM, or the node's `static`
# in `.data` (an unconfigured node must be all zero, so it costs no flash image).
#
#   examples/firmware/size-report.sh            # print the report
#   examples/firmware/size-report.sh --write    # and append it to docs/performance.md
#
# Needs: rustup's llvm-tools (llvm-size), python3 with pyelftools (installed if missing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
# The firmware has its own workspace and target dir (examples/firmware/target).
unset CARGO_TARGET_DIR

rustup component add llvm-tools >/dev/null 2>&1 || true
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
size="$bin/llvm-size"
[ -x "$size" ] || { echo "llvm-size not found in $bin (rustup component add llvm-tools)" >&2; exit 1; }
python3 -c 'import elftools' 2>/dev/null || python3 -m pip install --quiet pyelftools

elf="$here/target/thumbv7em-none-eabihf/release/fcan-example-firmware"
flash_of() { grep -E '^\| flash: fcan-runtime-nostd' "$1" | cut -d'|' -f3 | tr -d ' '; }

# The variants first, so the ELF left behind is the measured one.
cargo build --release --no-default-features --features irq-receive
irq_md="$(mktemp)"
python3 "$here/size_breakdown.py" "$elf" "$irq_md" >/dev/null
irq_flash="$(flash_of "$irq_md")"
rm -f "$irq_md"

# Berkeley sizes (text, bss) of the whole binary, for the update variant's cost.
berkeley() { "$size" "$elf" | awk 'NR==2 {print $1, $3}'; }
cargo build --release --no-default-features --features update
read -r upd_text upd_bss <<<"$(berkeley)"

cargo build --release --no-default-features
read -r base_text base_bss <<<"$(berkeley)"

echo
echo "== llvm-size -A (sections, bytes)"
"$size" -A "$elf" | grep -E '^(section|\.vector_table|\.text|\.rodata|\.data|\.bss|\.uninit) '
echo
echo "== llvm-size (Berkeley)"
"$size" "$elf"
echo
md="$(mktemp)"
python3 "$here/size_breakdown.py" "$elf" "$md"
poll_flash="$(flash_of "$md")"
{
  echo
  echo "With the receive interrupt feeding the node through \`fcan_runtime_nostd::Mailbox\`"
  echo "(\`--features irq-receive\`): runtime + fcan-core + generated code + heapless $irq_flash B"
  echo "of flash ($((irq_flash - poll_flash)) B for the mailbox and \`Node::receive_from\`), the same RAM for the node."
  echo
  echo "With firmware updates over the bus (\`--features update\`: the runtime's update state"
  echo "machine, SHA-256, the application's rule and a 4 KiB staging slot in RAM standing in for"
  echo "the spare flash bank): the whole binary $upd_text B of flash (+$((upd_text - base_text)) B) and"
  echo "$upd_bss B of .bss (+$((upd_bss - base_bss)) B, of which 4096 B are the staging slot, flash on a board)."
} | tee -a "$md"
over="$(grep -E '^\| (flash: fcan-runtime-nostd \+ fcan-core \+ generated code \+ heapless \(attributed\)|static RAM: the node|flash: the node.s initialiser image) ' "$md" | grep -c '| NO |' || true)"

if [ "${1:-}" = "--write" ]; then
  # Replaces the generated block of the "## Firmware size" section of docs/performance.md
  # (between the size-report markers); creates the section at the end if it is missing.
  doc="$root/docs/performance.md"
  tools="$(rustc --version)"
  python3 - "$doc" "$md" "$tools" <<'PY'
import sys
doc, md, tools = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(doc).read()
head = "## Firmware size (thumbv7em-none-eabihf)"
begin, end = "<!-- size-report:begin -->", "<!-- size-report:end -->"
block = (begin + "\n\nMeasured with " + tools + ".\n\n" + open(md).read() + "\n" + end)
if begin in text and end in text:
    a = text.index(begin)
    b = text.index(end) + len(end)
    text = text[:a] + block + text[b:]
else:
    if head not in text:
        text = text.rstrip("\n") + "\n\n" + head + "\n"
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(doc, "w").write(text)
PY
  echo "updated $doc"
fi
rm -f "$md"
if [ "$over" != "0" ]; then
  echo "size report: the node is over its budget (16 KiB flash, 4 KiB RAM); see the table above" >&2
  exit 1
fi
echo "size report: the node is within its budget (16 KiB flash, 4 KiB RAM)"
