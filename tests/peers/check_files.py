"""Peer checks of fcan's files by libraries nobody here wrote.

    check_files.py DECODE_DIR... [--record RECORD_DIR]

For each DECODE_DIR (written by `tests/tests/decode.rs` with FCAN_DECODE_ARTIFACTS set):
capture.log (candump -L), decoded.jsonl (`fcan decode`), capture.mcap (`fcan decode
--mcap`) and plan.dbc (`fcan plan --dbc`).

* Python `mcap` reads the MCAP file: one json/jsonschema channel per topic with values
  equal, in order, to the JSON lines, each valid against its channel's JSON Schema; the
  raw frames channel holds every frame of the capture; the schema blobs are attachments
  named by their SHA-256; node info and plans are metadata.
* `cantools` loads the DBC and decodes every frame of the capture it describes; for each
  topic a single ordinary frame carries whole, the values equal fcan's, in order.

RECORD_DIR (written by `tests/tests/record.rs` with FCAN_RECORD_ARTIFACTS set):
record.mcap (`fcan record`) and live.json (what the master delivered live meanwhile, its
topics with their fields' types, the commands published, the nodes, the command's
summary). Python `mcap` reads the file: a channel per topic with the JSON Schema the
fields' types call for, message counts equal to the summary's, every topic's values a run
of the live values (the commands exactly), raw frames, blobs and metadata.
"""
import collections, hashlib, json, re, struct, sys
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


def validate(v, schema, where):
    """`v` against the subset of JSON Schema fcan writes (type, items, min/maxItems,
    minimum/maximum, required, additionalProperties: false); a list of problems."""
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    def is_type(t):
        return {
            "object": isinstance(v, dict),
            "array": isinstance(v, list),
            "boolean": isinstance(v, bool),
            "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "string": isinstance(v, str),
            "null": v is None,
        }[t]
    if types and not any(is_type(t) for t in types):
        return [f"{where}: {v!r} is not {types}"]
    problems = []
    if isinstance(v, dict):
        props = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(v):
            problems.append(f"{where}: fields {sorted(v)} vs required {schema.get('required')}")
        if schema.get("additionalProperties") is False and set(v) - set(props):
            problems.append(f"{where}: fields beyond the schema {set(v) - set(props)}")
        for k, x in v.items():
            if k in props:
                problems += validate(x, props[k], f"{where}.{k}")
    elif isinstance(v, list):
        if not (schema.get("minItems", 0) <= len(v) <= schema.get("maxItems", len(v))):
            problems.append(f"{where}: {len(v)} items")
        for i, x in enumerate(v):
            problems += validate(x, schema.get("items", {}), f"{where}[{i}]")
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in schema and v < schema["minimum"] or "maximum" in schema and v > schema["maximum"]:
            problems.append(f"{where}: {v} outside [{schema.get('minimum')}, {schema.get('maximum')}]")
    return problems


def expected_field_schema(ty, length):
    """The JSON Schema fcan must give a field of type `ty` (and array length), worked out
    here from the type's name, not read from fcan."""
    if ty == "bool":
        one = {"type": "boolean"}
    elif ty in ("f32", "f64"):
        one = {"type": ["number", "null"]}
    elif ty in ("u64", "i64"):
        one = {"type": ["integer", "string"]}
    else:
        bits = int(ty[1:])
        lo, hi = (0, 2**bits - 1) if ty[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        one = {"type": "integer", "minimum": lo, "maximum": hi}
    if length is None:
        return one
    return {"type": "array", "items": one, "minItems": length, "maxItems": length}


def same_schema(got, want):
    """`got` has every key of `want` with the same value (descriptions are free text)."""
    for k, w in want.items():
        g = got.get(k)
        if isinstance(w, dict):
            if not isinstance(g, dict) or not same_schema(g, w):
                return False
        elif g != w:
            return False
    return True


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
            bad = [p for v in by_topic[topic] for p in validate(v, schema, topic)]
            check(not bad, f"{d}: every value of {topic} is valid against its JSON Schema: {bad[:3]}")
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
    # fcan writes an f32 as the shortest decimal that reads back as that f32 (0.7, not
    # 0.699999988079071); cantools gives the f32's exact value widened to a Python float.
    # So fcan's number is taken through f32 for the 32-bit float signals, as a reader of
    # its JSON would (both are then the same f32, exactly).
    f32_signals = {s.name for m in db.messages for s in m.signals if s.is_float and s.length == 32}

    def as_dbc(topic, value):
        out = {}
        for field, v in value.items():
            if isinstance(v, list):
                out[field] = [f32(x) if f"{ident(topic)}_{field}_{k}" in f32_signals else x
                              for k, x in enumerate(v)]
            else:
                out[field] = f32(v) if f"{ident(topic)}_{field}" in f32_signals else v
        return out

    for topic in whole:
        fcan_values = [as_dbc(topic, v) for v in by_topic[topic]]
        check(cantools_values[topic] == fcan_values,
              f"{d}: cantools decodes {topic} as fcan does ({len(cantools_values[topic])} vs {len(by_topic[topic])})")
    print(f"{d.name}: {len(whole)} topics decoded equal by cantools, {len(by_topic)} topics equal in MCAP")


def f32(x):
    """`x` rounded to the nearest f32 (booleans and integers as they are)."""
    if isinstance(x, float):
        return struct.unpack("<f", struct.pack("<f", x))[0]
    return x


def check_record(d):
    """`fcan record`'s file against what the master delivered live meanwhile."""
    live = json.loads((d / "live.json").read_text())
    summary, topics = live["summary"], live["topics"]
    with open(d / "record.mcap", "rb") as f:
        reader = make_reader(f)
        summary_rec = reader.get_summary()
        channels = {c.topic: c for c in summary_rec.channels.values()}
        # A channel per topic of every node, with the schema its fields' types call for.
        check(set(topics) | {"/fcan/frames"} == set(channels),
              f"{d}: channels {sorted(set(channels) ^ set(topics))} differ from the master's topics")
        for topic, info in topics.items():
            c = channels[topic]
            check(c.message_encoding == "json", f"{topic}: json messages")
            check(c.metadata.get("fcan.dir") == info["dir"] and c.metadata.get("fcan.node") == str(info["node"])
                  and c.metadata.get("fcan.period_us") == str(info["period_us"]),
                  f"{topic}: channel metadata {c.metadata} vs {info}")
            s = summary_rec.schemas[c.schema_id]
            check(s.encoding == "jsonschema", f"{topic}: jsonschema")
            check(s.name == "fcan." + topic.lstrip("/").replace("/", "."), f"{topic}: schema name {s.name}")
            schema = json.loads(s.data)
            names = [fl["name"] for fl in info["fields"]]
            check(schema["type"] == "object" and schema["required"] == names and list(schema["properties"]) == names,
                  f"{topic}: schema fields {list(schema['properties'])} vs {names}, in order")
            for fl in info["fields"]:
                want = expected_field_schema(fl["type"], fl["len"])
                check(same_schema(schema["properties"][fl["name"]], want),
                      f"{topic}.{fl['name']}: {fl['type']}{[fl['len']] if fl['len'] else ''} as {schema['properties'][fl['name']]}, want {want}")
        got = collections.defaultdict(list)
        seqs = collections.defaultdict(list)
        times = collections.defaultdict(list)
        frames = []
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            v = json.loads(message.data)
            seqs[channel.topic].append(message.sequence)
            times[channel.topic].append(message.log_time)
            if channel.topic == "/fcan/frames":
                frames.append(v)
            else:
                got[channel.topic].append(v)
                bad = validate(v, json.loads(schema.data), channel.topic)
                check(not bad, f"{d}: a value of {channel.topic} valid against its JSON Schema: {bad[:3]}")
        # Counts: the summary's, and the file's own statistics.
        total = sum(len(v) for v in got.values()) + len(frames)
        check(total == summary["messages"] == summary_rec.statistics.message_count,
              f"{d}: messages {total} == summary {summary['messages']} == statistics {summary_rec.statistics.message_count}")
        check(len(frames) == summary["frames"] and summary["frames_lost"] == 0,
              f"{d}: raw frames {len(frames)} == summary {summary['frames']}")
        for topic in got:
            check(seqs[topic] == list(range(1, len(seqs[topic]) + 1)), f"{topic}: sequence 1, 2, 3 …")
            check(times[topic] == sorted(times[topic]), f"{topic}: log times never go back")
        # Values: every periodic topic recorded, each topic's values a run of the live ones.
        periodic = [t for t, i in topics.items() if i["dir"] == "s2m" and i["period_us"] > 0]
        for topic in periodic:
            expect = 0.5e6 / topics[topic]["period_us"]  # 0.5 s recorded
            check(0.8 * expect <= len(got[topic]) <= 1.2 * expect + 1,
                  f"{d}: {topic} every {topics[topic]['period_us']} µs: {len(got[topic])} values in 0.5 s")
        for topic, values in got.items():
            all_live = live["live"].get(topic, [])
            runs = any(all_live[i:i + len(values)] == values for i in range(len(all_live) - len(values) + 1))
            check(runs, f"{d}: {topic}: the {len(values)} recorded values are a run of the {len(all_live)} delivered live")
        for topic, values in live["published"].items():
            check(got[topic] == values, f"{d}: {topic} holds exactly the commands published: {got[topic]}")
        # The analog samples (a triangle wave) and the commanded motor move; idle motors hold.
        moving = {t for t in periodic if len({json.dumps(v, sort_keys=True) for v in got[t]}) > 1}
        check({"/io_board3/analog/samples", "/motor_driver2/motor3/feedback"} <= moving,
              f"{d}: recorded values change over time: {sorted(moving)}")
        fd = any(len(fr["data"]) > 8 for fr in frames)
        check(all(0 <= fr["id"] < 2**29 and (fr["extended"] or fr["id"] < 2**11) and len(fr["data"]) <= 64
                  and (fr["fd"] or len(fr["data"]) <= 8) for fr in frames) and fd,
              f"{d}: raw frames are CAN frames, FD among them")
        # Blobs, node info, plans.
        f.seek(0)
        reader = make_reader(f)
        blobs = {a.name: hashlib.sha256(a.data).hexdigest() for a in reader.iter_attachments()}
        check(len(blobs) == 2 and all(n == f"schema/{h}.fcanblob" for n, h in blobs.items()),
              f"{d}: two schema blobs named by their SHA-256: {list(blobs)}")
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
        check(meta.get("fcan.recording", {}).get("source") == "fcan record"
              and meta["fcan.recording"].get("frames_topic") == "/fcan/frames", f"{d}: recording metadata {meta.get('fcan.recording')}")
        for nid, name in live["nodes"].items():
            info = meta.get(f"fcan.node.{nid}", {})
            check(info.get("id") == nid and info.get("name") == name and info.get("mode") in ("fd", "fd_brs", "classic")
                  and info.get("boot_id", "").isdigit() and f"schema/{info.get('schema')}.fcanblob" in blobs,
                  f"{d}: node info of {name}: {info}")
            plan = json.loads(meta.get(f"fcan.plan.{nid}", {}).get("json", "null") or "null")
            check(plan is not None and plan["frames"], f"{d}: plan of {name}")
        check(len(live["nodes"]) == summary["nodes"] == 3, f"{d}: three nodes")
    print(f"{d.name}: {len(got)} topics, {len(frames)} frames, {total} messages in fcan record's file, as delivered live")


args = sys.argv[1:]
record = None
if "--record" in args:
    i = args.index("--record")
    record = Path(args[i + 1])
    del args[i:i + 2]
for arg in args:
    check_dir(Path(arg))
if record is not None:
    check_record(record)
check(checks > 0, "no check ran")
print(f"files peer: {checks} checks passed")
