#!/usr/bin/env bash
# Peer checks of fcan's files with libraries no one here wrote (tests/peers/check_files.py):
# the Python `mcap` package reads `fcan decode --mcap`'s file, `cantools` loads
# `fcan plan --dbc`'s DBC and decodes the capture with it; both must agree with
# `fcan decode`'s JSON lines, which tests/tests/decode.rs proves equal to what the master
# delivered live. FD and Classical CAN. The Python `mcap` package also reads a file
# `fcan record` wrote (tests/tests/record.rs), against what the master delivered live
# while it recorded. Nothing leaves the machine.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"

venv=$root/target/files-peer-venv
py=$venv/bin/python
if ! "$py" -c "import mcap, cantools" 2>/dev/null; then
  echo "==> venv with mcap and cantools"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "mcap>=1.2,<2" "cantools>=39,<41"
fi

out=$root/target/files-peer
rm -rf "$out"
mkdir -p "$out"
echo "==> a session recorded, decoded, exported (tests/tests/decode.rs)"
FCAN_DECODE_ARTIFACTS=$out cargo test -q -p fcan-e2e --test decode decode_equals_live
echo "==> a session recorded by fcan record (tests/tests/record.rs)"
FCAN_RECORD_ARTIFACTS=$out/record cargo test -q -p fcan-e2e --test record
echo "==> read back by mcap and cantools"
"$py" tests/peers/check_files.py "$out/fd" "$out/classic" --record "$out/record"
