#!/usr/bin/env python3
"""rosbags (PyPI) judges fcan's ROS 2 types: definitions, RIHS01 hashes, CDR both ways,
and the interface packages `fcan-codegen ros-package` writes.

Usage: check_ros2.py ARTIFACTS PACKAGES_DIR...

ARTIFACTS holds manifest.json from tests/tests/ros2_types.rs (export_for_rosbags): every
type fcan-ros2 knows with its definition and hash, and CDR samples with the ROS message
each must decode to. This script
  - compares the hash of every bundled message with rosbags' own Jazzy definition's
    (independent definitions, independent hashing);
  - parses every other definition with rosbags' .msg parser and compares hashes
    (custom and generated types, services' request and response);
  - decodes every sample's CDR with rosbags and compares it with the expected ROS
    message, and serializes the expected message with rosbags and compares bytes;
  - writes from_rosbags.json: rosbags' serialization of every from-ROS sample, which
    the Rust test decode_what_rosbags_wrote decodes into the fcan values;
  - parses every .msg/.srv under each PACKAGES_DIR with rosbags and compares the hash
    of each with the manifest's (when the manifest has it).
"""
import json
import pathlib
import sys

import numpy as np
from rosbags.typesys import Stores, get_typestore, get_types_from_msg
from rosbags.typesys.base import Nodetype

checks = 0
failures = []


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def parse(text, name):
    """rosbags' .msg parser, the type filed under `name` (it files a name without
    /msg/ elsewhere; the definition is what is judged)."""
    parsed = get_types_from_msg(text, name)
    assert len(parsed) == 1, parsed
    return {name: next(iter(parsed.values()))}


def split_srv(text):
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == '---':
            return ''.join(lines[:i]), ''.join(lines[i + 1:])
    raise ValueError('no --- line')


DTYPES = {
    'bool': np.bool_, 'byte': np.uint8, 'char': np.uint8, 'int8': np.int8,
    'uint8': np.uint8, 'int16': np.int16, 'uint16': np.uint16, 'int32': np.int32,
    'uint32': np.uint32, 'int64': np.int64, 'uint64': np.uint64,
    'float32': np.float32, 'float64': np.float64,
}


def to_plain(store, msg, typ):
    out = {}
    for name, desc in store.fielddefs[typ][1]:
        v = getattr(msg, name)
        kind, rest = desc
        if kind == Nodetype.NAME:
            out[name] = to_plain(store, v, rest)
        elif kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            (ekind, erest), _ = rest
            if ekind == Nodetype.NAME:
                out[name] = [to_plain(store, x, erest) for x in v]
            elif isinstance(v, np.ndarray):
                out[name] = v.tolist()
            else:
                out[name] = list(v)
        else:
            out[name] = v.item() if hasattr(v, 'item') else v
    return out


def from_plain(store, d, typ):
    kwargs = {}
    for name, desc in store.fielddefs[typ][1]:
        v = d[name]
        kind, rest = desc
        if kind == Nodetype.NAME:
            kwargs[name] = from_plain(store, v, rest)
        elif kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            (ekind, erest), _ = rest
            if ekind == Nodetype.NAME:
                kwargs[name] = [from_plain(store, x, erest) for x in v]
            elif erest[0] == 'string':
                kwargs[name] = list(v)
            else:
                kwargs[name] = np.array(v, dtype=DTYPES[erest[0]])
        else:
            kwargs[name] = v
    return store.types[typ](**kwargs)


def main():
    art = pathlib.Path(sys.argv[1])
    package_dirs = [pathlib.Path(p) for p in sys.argv[2:]]
    manifest = json.loads((art / 'manifest.json').read_text())
    store = get_typestore(Stores.ROS2_JAZZY)
    own = set(store.types)
    ours = {}
    pending = {}
    bundled_checked = 0
    for t in manifest['types']:
        name = t['name']
        if t['kind'] == 'msg':
            ours[name] = t['hash']
            if name in own:
                check(t['bundled'], f'{name}: rosbags has it, fcan does not say it is bundled')
                check(store.hash_rihs01(name) == t['hash'],
                      f"{name}: hash {t['hash']} != rosbags' own {store.hash_rihs01(name)}")
                bundled_checked += 1
            else:
                check(not t['bundled'], f'{name}: bundled but not in rosbags\' Jazzy store')
                pending.update(parse(t['text'], name))
        else:
            req, resp = split_srv(t['text'])
            ours[name + '_Request'] = t['request_hash']
            ours[name + '_Response'] = t['response_hash']
            pending.update(parse(req, name + '_Request'))
            pending.update(parse(resp, name + '_Response'))
            # The service itself, as ROS describes it for its hash.
            pending[name + '_Event'] = ([], [
                ('info', (Nodetype.NAME, 'service_msgs/msg/ServiceEventInfo')),
                ('request', (Nodetype.SEQUENCE, ((Nodetype.NAME, name + '_Request'), 1))),
                ('response', (Nodetype.SEQUENCE, ((Nodetype.NAME, name + '_Response'), 1))),
            ])
            pending[name] = ([], [
                ('request_message', (Nodetype.NAME, name + '_Request')),
                ('response_message', (Nodetype.NAME, name + '_Response')),
                ('event_message', (Nodetype.NAME, name + '_Event')),
            ])
            ours[name] = t['hash']
    store.register(pending)
    for name in pending:
        if name in ours:
            check(store.hash_rihs01(name) == ours[name],
                  f'{name}: hash {ours[name]} != rosbags {store.hash_rihs01(name)}')
    check(bundled_checked >= 30, f'only {bundled_checked} bundled messages compared')

    from_rosbags = []
    for s in manifest['samples']:
        typ = s['type']
        ours_cdr = bytes.fromhex(s['cdr'])
        what = f"{s['label']} seed {s['seed']} ({typ})"
        try:
            got = to_plain(store, store.deserialize_cdr(ours_cdr, typ), typ)
            check(got == s['ros'], f'{what}: rosbags decodes {got}, expected {s["ros"]}')
            theirs = bytes(store.serialize_cdr(from_plain(store, s['ros'], typ), typ))
            check(theirs == ours_cdr, f'{what}: rosbags encodes {theirs.hex()}, fcan {ours_cdr.hex()}')
        except Exception as e:  # noqa: BLE001 - every failure is reported, not the first
            check(False, f'{what}: {type(e).__name__}: {e}')
            continue
        if s['flow'] == 'from_ros':
            from_rosbags.append({'label': s['label'], 'seed': s['seed'], 'cdr': theirs.hex()})
    (art / 'from_rosbags.json').write_text(json.dumps(from_rosbags))

    parsed_files = 0
    for root in package_dirs:
        for f in sorted(root.glob('*/msg/*.msg')) + sorted(root.glob('*/srv/*.srv')):
            pkg = f.parent.parent.name
            text = f.read_text()
            try:
                if f.suffix == '.msg':
                    name = f'{pkg}/msg/{f.stem}'
                    halves = {name: text}
                else:
                    name = f'{pkg}/srv/{f.stem}'
                    req, resp = split_srv(text)
                    halves = {name + '_Request': req, name + '_Response': resp}
                for n, body in halves.items():
                    fresh = get_typestore(Stores.ROS2_JAZZY)
                    fresh.register(parse(body, n))
                    parsed_files += 1
                    if n in ours:
                        check(fresh.hash_rihs01(n) == ours[n], f'{f}: {n} hash differs from the bridge\'s')
            except Exception as e:  # noqa: BLE001
                check(False, f'{f}: rosbags cannot parse it: {type(e).__name__}: {e}')
    check(not package_dirs or parsed_files > 0, 'no package files found')

    print(f'check_ros2: {checks} checks, {len(manifest["types"])} types '
          f'({bundled_checked} bundled against rosbags\' own), {len(manifest["samples"])} CDR samples, '
          f'{len(from_rosbags)} written back, {parsed_files} package definitions parsed')
    if failures:
        for f in failures[:40]:
            print('FAIL', f)
        print(f'{len(failures)} failure(s)')
        sys.exit(1)


if __name__ == '__main__':
    main()
