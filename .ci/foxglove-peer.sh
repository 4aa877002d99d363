#!/usr/bin/env bash
# The Foxglove peer test: a Foxglove WebSocket client no one here wrote
# (@foxglove/ws-protocol from npm, over `ws`) against the demo's Foxglove server,
# asserting channels, values, parameters, services and client publishing
# (tests/foxglove/test.mjs), checked against what the `fcan` CLI prints through the
# remote API.
#
# 1. Node.js and npm (installed with apt-get only if missing); the test's packages with
#    `npm ci` from the committed lockfile.
# 2. Builds the demo and the `fcan` CLI.
# 3. Starts the demo on two free loopback ports (its remote API and its Foxglove
#    WebSocket), runs test.mjs against it, then stops the demo.
# Fails if an install, the build or any check fails, or if no check passed. Loopback only.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "==> installing Node.js and npm (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
echo "==> node $(node --version), npm $(npm --version)"

echo "==> npm ci (tests/foxglove)"
(cd tests/foxglove && npm ci --no-audit --no-fund --loglevel=error)

echo "==> building the demo and fcan"
cargo build --quiet -p fcan-examples --bin demo -p fcan-cli --bin fcan
exe() {
  cargo build -p "$1" --bin "$2" --message-format=json 2>/dev/null \
    | grep -o "\"executable\":\"[^\"]*/$2\"" | sed 's/^"executable":"//; s/"$//' | tail -1
}
demo=$(exe fcan-examples demo)
fcan=$(exe fcan-cli fcan)
[[ -x $demo && -x $fcan ]] || { echo "foxglove-peer: demo or fcan not built" >&2; exit 1; }

free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
zport=$(free_port)
fport=$(free_port)
while [[ $fport == "$zport" ]]; do fport=$(free_port); done
log=$(mktemp)
echo "==> demo: remote API on tcp/127.0.0.1:$zport, Foxglove on ws://127.0.0.1:$fport (log: $log)"
# --seconds bounds the demo's life even if this script is killed before the trap runs.
"$demo" --seconds 300 --no-repl --serve "tcp/127.0.0.1:$zport" --foxglove "127.0.0.1:$fport" \
  </dev/null >"$log" 2>&1 &
demo_pid=$!
trap 'kill "$demo_pid" 2>/dev/null || true; wait "$demo_pid" 2>/dev/null || true; rm -f "$log"' EXIT

# The demo prints the URL once its nodes run and the server listens.
for _ in $(seq 600); do
  grep -q "^Foxglove: ws://" "$log" && break
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "^Foxglove: ws://127.0.0.1:$fport" "$log"; then
  echo "foxglove-peer: the demo did not start its Foxglove server; its output:" >&2
  cat "$log" >&2
  exit 1
fi

echo "==> tests/foxglove/test.mjs"
status=0
out=$(node tests/foxglove/test.mjs --url "ws://127.0.0.1:$fport" --fcan "$fcan" \
  --connect "tcp/127.0.0.1:$zport" 2>&1) || status=$?
echo "$out"
if ! kill -0 "$demo_pid" 2>/dev/null; then
  echo "foxglove-peer: the demo exited early; its output:" >&2
  cat "$log" >&2
  exit 1
fi
summary=$(tail -1 <<<"$out")
if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  echo "foxglove-peer: the peer test failed; the demo's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "foxglove-peer: $summary"
