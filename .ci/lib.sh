# Helpers the CI scripts share; source it after `cd "$root"`.
#
# Why: each script used to build its binaries twice, the second time with
# `--message-format=json 2>/dev/null | grep executable` to learn their paths. When that
# second cargo failed (a different feature set, a full disk), its errors went to
# /dev/null, grep matched nothing and `set -euo pipefail` ended the script without a
# word: a CI run once stopped right after "==> building …" with exit 1 and nothing
# else. Here cargo runs once, its own output (errors included) stays on stderr, and a
# failure says what failed and how much disk is left.

# cargo_exes CARGO_ARGS...: runs `cargo CARGO_ARGS` with JSON messages on stdout and
# cargo's human-readable diagnostics on stderr; prints the path of every executable it
# built or found fresh, one per line.
cargo_exes() {
  local out
  out=$(mktemp)
  if ! cargo "$@" --message-format=json-render-diagnostics >"$out"; then
    rm -f "$out"
    echo "ci: \`cargo $*\` failed; disk left:" >&2
    df -h . >&2 || true
    return 1
  fi
  grep -o '"executable":"[^"]*"' "$out" | sed 's/^"executable":"//; s/"$//' || true
  rm -f "$out"
}

# exe_named NAME: of the paths on stdin (from cargo_exes), the last executable whose
# file name is NAME (a binary) or NAME-<hash> (a test binary). Fails, naming NAME, if
# there is none.
exe_named() {
  local name=$1 path
  path=$(grep -E "/$name(-[0-9a-f]+)?\$" | tail -1 || true)
  if [[ -z $path || ! -x $path ]]; then
    echo "ci: no executable named $name was built" >&2
    return 1
  fi
  echo "$path"
}

# loopback_netns NAME: creates the network namespace NAME with only its loopback, up and
# able to multicast (DDS discovers by multicast): what runs in it reaches nothing beyond
# this machine. Sets `ns` (NAME) and `log` (a new temporary file for the server's output);
# on exit kills what still runs in the namespace, deletes it and the log. Run commands in
# it with `inns CMD...`. The three DDS lanes share it.
loopback_netns() {
  ns=$1
  ip netns add "$ns"
  log=$(mktemp)
  trap loopback_netns_cleanup EXIT
  inns ip link set lo up
  inns ip link set lo multicast on
  inns ip route add 224.0.0.0/4 dev lo
}
loopback_netns_cleanup() {
  ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  sleep 0.2
  ip netns del "$ns" 2>/dev/null || true
  rm -f "$log"
}
inns() { ip netns exec "$ns" "$@"; }
