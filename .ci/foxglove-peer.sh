#!/usr/bin/env bash
# The Foxglove peer test: a Foxglove WebSocket client no one here wrote
# (@foxglove/ws-protocol from npm, over `ws`) against fcan's Foxglove server, asserting
# channels, values, parameters, services, a node's own refusal and client publishing
# (tests/foxglove/test.mjs), checked against what the `fcan` CLI prints through the
# remote API. Run twice:
#
#   a. `fcan serve --bus sim --foxglove ADDR`: the daemon's parser and function, with the
#      example nodes on its simulated bus (examples/host/src/bin/serve-sim.rs; the plain
#      `fcan serve --bus sim` binary owns an empty simulated bus nothing can join). Nobody
#      commands the motors.
#   b. the demo's `--foxglove ADDR`, while the demo commands motor_driver1's motors.
#
# 1. Node.js and npm (installed with apt-get only if missing); the test's packages with
#    `npm ci` from the committed lockfile.
# 2. Builds serve-sim, the demo and the `fcan` CLI.
# 3. For each: starts it on two free loopback ports (its remote API and its Foxglove
#    WebSocket), waits for the three nodes, runs test.mjs against it, then stops it.
# Fails if an install, the build or any check fails, or if no check passed. Loopback only;
# Zenoh scouting is off (the daemon's defaults).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "==> installing Node.js and npm (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
echo "==> node $(node --version), npm $(npm --version)"

echo "==> npm ci (tests/foxglove)"
(cd tests/foxglove && npm ci --no-audit --no-fund --loglevel=error)

echo "==> building serve-sim, the demo and fcan"
exes=$(cargo_exes build --quiet -p fcan-examples --bin serve-sim --bin demo -p fcan-cli --bin fcan)
serve_sim=$(exe_named serve-sim <<<"$exes")
demo=$(exe_named demo <<<"$exes")
fcan=$(exe_named fcan <<<"$exes")

free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

pid=""
log=""
stop() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pid=""
  [[ -n $log ]] && rm -f "$log"
  log=""
}
trap stop EXIT

summaries=()
# run NAME DRIVEN COMMAND...: COMMAND is started with ZPORT and FPORT in its arguments
# replaced by the two ports.
run() {
  local name=$1 driven=$2
  shift 2
  local zport fport
  zport=$(free_port)
  fport=$(free_port)
  while [[ $fport == "$zport" ]]; do fport=$(free_port); done
  local args=()
  for a in "$@"; do
    a=${a//ZPORT/$zport}
    args+=("${a//FPORT/$fport}")
  done
  log=$(mktemp)
  echo "==> $name: remote API on tcp/127.0.0.1:$zport, Foxglove on ws://127.0.0.1:$fport (log: $log)"
  echo "    ${args[*]}"
  # `timeout` bounds its life even if this script is killed before the trap runs.
  timeout 600 "${args[@]}" </dev/null >"$log" 2>&1 &
  pid=$!
  # Both print the URL once the server listens; then wait for the three nodes to run.
  local up=""
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || break
    if grep -q "^Foxglove: ws://127.0.0.1:$fport" "$log"; then
      local running
      running=$("$fcan" --connect "tcp/127.0.0.1:$zport" --bus sim --json nodes 2>/dev/null \
        | grep -c '"phase":"running"' || true)
      if [[ $running -eq 3 ]]; then up=yes; break; fi
    fi
    sleep 0.1
  done
  if [[ -z $up ]]; then
    echo "foxglove-peer: $name did not serve its Foxglove server with three running nodes; its output:" >&2
    cat "$log" >&2
    exit 1
  fi

  echo "==> tests/foxglove/test.mjs against $name"
  local status=0 out
  out=$(node tests/foxglove/test.mjs --url "ws://127.0.0.1:$fport" --fcan "$fcan" \
    --connect "tcp/127.0.0.1:$zport" --driven "$driven" 2>&1) || status=$?
  echo "$out"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "foxglove-peer: $name exited early; its output:" >&2
    cat "$log" >&2
    exit 1
  fi
  local summary
  summary=$(tail -1 <<<"$out")
  if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
    echo "foxglove-peer: the peer test failed against $name; its output:" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  summaries+=("$name: $summary")
  stop
}

run "fcan serve --foxglove" none "$serve_sim" --bus sim --no-cache \
  --listen tcp/127.0.0.1:ZPORT --foxglove 127.0.0.1:FPORT
run "the demo's --foxglove" demo "$demo" --seconds 300 --no-repl \
  --serve tcp/127.0.0.1:ZPORT --foxglove 127.0.0.1:FPORT

for s in "${summaries[@]}"; do echo "foxglove-peer: $s"; done
