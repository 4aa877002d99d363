#!/usr/bin/env bash
# The rooms' dependency rules, proved with `cargo tree` (issue 11):
# - the router does not depend on the master (it links buses through fcan-transport);
# - a firmware's build.rs (fcan-codegen without its `cli` feature) compiles no clap;
# - the master as a library compiles neither clap nor a YAML parser (the CLI is fcan-cli);
# - fcan-transport knows nothing of the master;
# - the Foxglove face (fcan-foxglove) compiles neither the CLI nor Zenoh;
# - fcan-codegen's command takes the ROS 2 types without the master (ros-package);
# - the ROS 2 bridge (fcan-ros2-bridge) compiles neither the CLI nor Zenoh;
# - vendor/rustdds is the published RustDDS plus its one patch (vendor/check.sh).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
status=0

# Fails when `cargo tree ARGS` lists a package whose name matches REGEX.
refuse() {
  local regex=$1 why=$2; shift 2
  local out
  out=$(cargo tree "$@" --prefix none --format '{p}' 2>&1) || { echo "deps: cargo tree $* failed:" >&2; echo "$out" >&2; status=1; return; }
  local hits
  hits=$(grep -E "^($regex) v" <<<"$out" | sort -u || true)
  if [[ -n $hits ]]; then
    echo "deps: FAIL: cargo tree $*: $why:" >&2
    echo "$hits" | sed 's/^/  /' >&2
    status=1
  else
    echo "deps: ok: cargo tree $* has no ${regex//|/, }"
  fi
}

refuse 'fcan-master' 'the router must not depend on the master' -p fcan-router
refuse 'fcan-master' 'the router must not depend on the master' -p fcan-router --no-default-features
refuse 'clap|clap_builder|fcan-ros2' 'a build.rs must not compile clap nor the ROS 2 types' -p fcan-codegen --no-default-features -e normal
refuse 'fcan-master|tokio' 'fcan-codegen ros-package needs the ROS 2 types, not the master' -p fcan-codegen -e normal
refuse 'fcan-master|tokio|libc' 'fcan-ros2 (values on) needs fcan-value, not the master' -p fcan-ros2 -e normal
refuse 'clap|clap_builder' "a firmware's build.rs must not compile clap" -p fcan-example-motor-driver -e build,normal
refuse 'clap|clap_builder|serde_yaml_ng|unsafe-libyaml' 'the master library must not compile the CLI' -p fcan-master -e normal
refuse 'fcan-master|clap|clap_builder' 'fcan-transport is below the master' -p fcan-transport -e normal
refuse 'clap|clap_builder|zenoh|fcan-remote|fcan-cli' 'the Foxglove face is a room of its own' -p fcan-foxglove -e normal
refuse 'clap|clap_builder|zenoh|fcan-remote|fcan-cli|foxglove' 'the ROS 2 bridge is a room of its own' -p fcan-ros2-bridge -e normal
refuse 'fcan-codegen|fcan-master|clap|clap_builder|zenoh' 'the fake-node library runs blobs: no codegen, no master, no CLI' -p fcan-fake -e normal
# The vendored RustDDS is the published crate plus its one patch (vendor/README.md).
if ! bash vendor/check.sh; then
  status=1
fi
exit $status
