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
