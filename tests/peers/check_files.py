"""Peer checks of fcan's files by libraries nobody here wrote.

For each artifact directory (written by `tests/tests/decode.rs` with
FCAN_DECODE_ARTIFACTS set): capture.log (candump -L), decoded.jsonl (`fcan decode`),
capture.mcap (`fcan decode --mcap`) and plan.dbc (`fcan plan --dbc`).

* Python `mcap` reads the MCAP file: one json/jsonschema channel per topic with values
  equal, in order, to the JSON lines; the raw frames channel holds every frame of the
  capture; the schema blobs are attachments named by their SHA-256; node info and plans
  are metadata.
* `cantools` loads the DBC and decodes every frame of the capture it describes; for each
  topic a single ordinary frame carries whole, the values equal fcan's, in order.
"""
import collections, hashlib, json, re, sys
from pathlib import Path

import cantools
from mcap.reader import make_reader

checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    checks += 1


def ident(topic):
    s = re.sub(r"[^A-Za-z0-9]", "_", topic.lstrip("/"))
    return "_" + s if s[:1].isdigit() else s


def capture_frames(path):
    """(time, id, data bytes) of every data frame of a candump -L log."""
    out = []
    for line in path.read_text().splitlines():
        m = re.match(r"\((\d+\.\d+)\) \S+ ([0-9A-Fa-f]+)#(#?)([0-9A-Fa-f]*)", line)
        if not m:
            continue
        t, cid, fd, data = m.groups()
        if fd:  # FD: one flags nibble before the data
            data = data[1:]
        out.append((float(t), int(cid, 16), len(cid) == 8, bytes.fromhex(data)))
    return out


def check_dir(d):
    lines = [json.loads(l) for l in (d / "decoded.jsonl").read_text().splitlines()]
    by_topic = collections.defaultdict(list)
    for l in lines:
        by_topic[l["topic"]].append(l["value"])
    check(len(by_topic) >= 5, f"{d}: decoded topics {sorted(by_topic)}")
    frames = capture_frames(d / "capture.log")

    # --- MCAP, read by the `mcap` package.
    with open(d / "capture.mcap", "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        channels = {c.topic: c for c in summary.channels.values()}
        for topic in by_topic:
            c = channels.get(topic)
            check(c is not None, f"{d}: MCAP channel for {topic}")
            check(c.message_encoding == "json", f"{topic}: json messages")
            s = summary.schemas[c.schema_id]
            check(s.encoding == "jsonschema", f"{topic}: jsonschema")
            schema = json.loads(s.data)
            first = by_topic[topic][0]
            check(sorted(schema["properties"]) == sorted(first), f"{topic}: schema fields {schema['properties'].keys()} vs {first.keys()}")
        got = collections.defaultdict(list)
        raw = 0
        for schema, channel, message in reader.iter_messages():
            if channel.topic == "/fcan/frames":
                raw += 1
            else:
                got[channel.topic].append(json.loads(message.data))
        for topic, values in by_topic.items():
            check(got[topic] == values, f"{d}: MCAP values of {topic} equal fcan decode's ({len(got[topic])} vs {len(values)})")
        check(raw == len(frames), f"{d}: raw frames in MCAP {raw} == capture {len(frames)}")
        f.seek(0)
        reader = make_reader(f)
        blobs = list(reader.iter_attachments())
        check(len(blobs) >= 2, f"{d}: schema blobs attached ({len(blobs)})")
        for a in blobs:
            digest = hashlib.sha256(a.data).hexdigest()
            check(a.name == f"schema/{digest}.fcanblob", f"{a.name} is named by its SHA-256 {digest}")
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
        check("fcan.recording" in meta, "recording metadata")
        plans = [json.loads(v["json"]) for k, v in meta.items() if k.startswith("fcan.plan.")]
        check(len(plans) == 3 and all(p["frames"] for p in plans), f"{d}: three plans in metadata")
        nodes = [v for k, v in meta.items() if k.startswith("fcan.node.")]
        check({n.get("name") for n in nodes} == {"motor_driver1", "motor_driver2", "io_board3"}, f"{d}: node info {nodes}")

    # --- DBC, read by cantools, decoding the capture.
    db = cantools.database.load_file(str(d / "plan.dbc"))
    check(len(db.messages) > 5, f"{d}: DBC messages {len(db.messages)}")
    fd_capture = any(len(data) > 8 for _, _, _, data in frames)
    check(all(m.is_fd == fd_capture for m in db.messages), f"{d}: FD frames marked as FD")
    # Topics with every field in one message: cantools's values per topic, in order.
    whole = {}  # topic -> message
    for topic, values in by_topic.items():
        want = set()
        for field, v in values[0].items():
            if isinstance(v, list):
                want |= {f"{ident(topic)}_{field}_{k}" for k in range(len(v))}
            else:
                want.add(f"{ident(topic)}_{field}")
        holders = [m for m in db.messages if want <= {s.name for s in m.signals}]
        if len(holders) == 1:
            whole[topic] = (holders[0], want)
    check(len(whole) >= 3, f"{d}: topics decodable by DBC: {sorted(whole)}")
    cantools_values = collections.defaultdict(list)
    ids = {m.frame_id: m for m in db.messages}
    for _, cid, ext, data in frames:
        m = ids.get(cid)
        if ext or m is None:
            continue
        sig = m.decode(data, decode_choices=False, scaling=False)
        topics_in = []
        for s in m.signals:  # signal order = entry order = presence bit order
            for topic, (holder, _) in whole.items():
                if holder is m and s.name.startswith(ident(topic) + "_") and topic not in topics_in:
                    topics_in.append(topic)
        # Every topic of the frame in entry order (= presence bit order), from the
        # message comment fcan writes: "<dir> frame <i> of <node>: /t1, /t2; ...".
        order = m.comment.split(": ", 1)[1].split(";")[0].split(", ")
        for topic in topics_in:
            if "presence_mask" in sig and not (int(sig["presence_mask"]) >> order.index(topic)) & 1:
                continue
            value = {}
            for field, v in by_topic[topic][0].items():
                if isinstance(v, list):
                    value[field] = [sig[f"{ident(topic)}_{field}_{k}"] for k in range(len(v))]
                else:
                    value[field] = sig[f"{ident(topic)}_{field}"]
            cantools_values[topic].append(value)
    for topic in whole:
        check(cantools_values[topic] == by_topic[topic],
              f"{d}: cantools decodes {topic} as fcan does ({len(cantools_values[topic])} vs {len(by_topic[topic])})")
    print(f"{d.name}: {len(whole)} topics decoded equal by cantools, {len(by_topic)} topics equal in MCAP")


for arg in sys.argv[1:]:
    check_dir(Path(arg))
check(checks > 0, "no check ran")
print(f"files peer: {checks} checks passed")
