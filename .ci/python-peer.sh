#!/usr/bin/env bash
# The peer test: a Zenoh client no one here wrote (eclipse-zenoh from PyPI) against the
# demo's remote API, asserting values (examples/python/test_remote.py).
#
# 1. A venv under target/ with eclipse-zenoh pinned to the version of the Rust `zenoh`
#    crate in Cargo.lock (the two are released together, same numbers).
# 2. Zenoh parses the example TLS/ACL configs of docs/remote.md (syntax and field names),
#    and examples/zenoh/check_acl.py checks what they let through: operator, viewer,
#    local program and certificate-less client, over TLS on loopback.
# 3. Builds the demo, runs it on a free loopback port (scouting off, as by default),
#    runs test_remote.py against it, then stops the demo.
# Fails if the install, a parse, the build or any check fails, or if no check passed.
# Loopback only.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
source .ci/lib.sh

zenoh_version=$(awk '$0 == "name = \"zenoh\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
[[ -n $zenoh_version ]] || { echo "python-peer: no zenoh crate in Cargo.lock" >&2; exit 1; }

venv=$root/target/python-peer-venv
py=$venv/bin/python
if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('eclipse-zenoh') != '$zenoh_version')" 2>/dev/null; then
  echo "==> venv with eclipse-zenoh==$zenoh_version"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "eclipse-zenoh==$zenoh_version"
fi

echo "==> Zenoh parses the example configs"
"$py" - examples/zenoh/*.json5 <<'EOF'
import sys, zenoh
for path in sys.argv[1:]:
    zenoh.Config.from_file(path)  # raises on a syntax error or an unknown field
    print(f"parsed {path}")
EOF

echo "==> the example TLS + ACL config lets through what docs/remote.md says (loopback)"
command -v openssl >/dev/null || { echo "python-peer: openssl is needed" >&2; exit 1; }
(cd examples/zenoh && "$py" check_acl.py)

echo "==> building the demo"
demo=$(cargo_exes build --quiet -p fcan-examples --bin demo | exe_named demo)

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
endpoint="tcp/127.0.0.1:$port"
log=$(mktemp)
echo "==> demo serving on $endpoint (log: $log)"
# --seconds bounds the demo's life even if this script is killed before the trap runs.
"$demo" --seconds 300 --no-repl --serve "$endpoint" </dev/null >"$log" 2>&1 &
demo_pid=$!
trap 'kill "$demo_pid" 2>/dev/null || true; wait "$demo_pid" 2>/dev/null || true; rm -f "$log"' EXIT

echo "==> examples/python/test_remote.py"
status=0
out=$(cd examples/python && "$py" test_remote.py --connect "$endpoint" --wait 60 2>&1) || status=$?
echo "$out"
if ! kill -0 "$demo_pid" 2>/dev/null; then
  echo "python-peer: the demo exited early; its output:" >&2
  cat "$log" >&2
  exit 1
fi
summary=$(tail -1 <<<"$out")
if [[ $status -ne 0 || ! $summary =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
  echo "python-peer: the peer test failed; the demo's output:" >&2
  tail -40 "$log" >&2
  exit 1
fi
echo "python-peer: $summary"
