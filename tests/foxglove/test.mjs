// The Foxglove peer test: a Foxglove WebSocket client no one here wrote
// (@foxglove/ws-protocol's FoxgloveClient over the `ws` package) against fcan's Foxglove
// server, checked against what the `fcan` CLI reports through the remote API.
//
//   node test.mjs --url ws://127.0.0.1:8765 --fcan target/debug/fcan \
//       --connect tcp/127.0.0.1:7447 --driven demo|none [--bus sim] \
//       [--node motor_driver2] [--ns motor1]
//
// `--driven demo`: the demo commands motor_driver1's motor0 (a ±2 rev position sine) and
// motor1; `--driven none`: nobody commands the motors (`fcan serve` with the example
// nodes, examples/host/src/bin/serve-sim.rs). The motor the test commands must be one
// nobody else commands. Every check prints one line; the last line is
// `N passed, M failed`; the exit status is 0 only if every check passed and there was at
// least one. .ci/foxglove-peer.sh runs it against `fcan serve --foxglove` and against the
// demo's `--foxglove`. Loopback only.

import { createRequire } from "node:module";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import WebSocket from "ws";

// The package's ES build imports without file extensions, which Node's ES loader
// refuses; its CommonJS build is the one Node can load.
const require = createRequire(import.meta.url);
const { FoxgloveClient, StatusLevel } = require("@foxglove/ws-protocol");
const run = promisify(execFile);

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []),
);
for (const required of ["url", "fcan", "connect", "driven"]) {
  if (!args[required] || (required === "driven" && !["demo", "none"].includes(args.driven))) {
    console.error(
      `usage: node test.mjs --url ws://HOST:PORT --fcan PATH --connect tcp/HOST:PORT --driven demo|none`,
    );
    process.exit(2);
  }
}
const demoDrives = args.driven === "demo";
const bus = args.bus ?? "sim";
const node = args.node ?? "motor_driver2";
const ns = args.ns ?? "motor1";
const motor = `/${node}/${ns}`;
const param = (name) => `${node}.${ns}.${name}`;

let passed = 0;
let failed = 0;
function check(ok, what, detail = "") {
  if (ok) {
    passed += 1;
    console.log(`ok   ${what}`);
  } else {
    failed += 1;
    const d = typeof detail === "string" ? detail : JSON.stringify(detail);
    console.log(`FAIL ${what}: ${String(d).slice(0, 400)}`);
  }
  return ok;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, ms, f) {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) return undefined;
    await sleep(20);
  }
}

/** The `fcan` CLI through the remote API (the demo's bus): one JSON value per line. */
async function fcan(...words) {
  const { stdout } = await run(
    args.fcan,
    ["--connect", args.connect, "--bus", bus, "--json", ...words],
    { timeout: 30000, maxBuffer: 16 << 20 },
  );
  return stdout
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** `{ready: bool, raw: [i16; 16]}` (the CLI's field list) → [["ready","bool",false],
 *  ["raw","i16",true]]. */
function fieldList(text) {
  return [
    ...String(text).matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(?:\[\s*([a-z0-9]+)\s*;\s*\d+\s*\]|([a-z0-9]+))/g),
  ].map((m) => [m[1], m[2] ?? m[3], m[2] !== undefined]);
}

/** The JSON Schema type the fcan server must give a scalar type. */
function schemaType(ty) {
  if (ty === "bool") return "boolean";
  if (ty === "f32" || ty === "f64") return "number";
  return "integer";
}
/** Whether a JSON value is of a JSON Schema property's type. */
function ofType(v, prop) {
  if (prop.type === "array") return Array.isArray(v) && v.every((x) => ofType(x, prop.items));
  const types = [].concat(prop.type);
  return types.some(
    (t) =>
      (t === "boolean" && typeof v === "boolean") ||
      (t === "number" && typeof v === "number") ||
      (t === "integer" && Number.isInteger(v)) ||
      (t === "string" && typeof v === "string") ||
      (t === "null" && v === null),
  );
}
const kind = (v) => (Array.isArray(v) ? "array" : v === null ? "null" : typeof v);
/** Two JSON values are equal: the same fields (in any order) with equal values. */
function same(a, b) {
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b;
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return JSON.stringify(ka) === JSON.stringify(kb) && ka.every((k) => same(a[k], b[k]));
}

// ---- the client and what it hears ------------------------------------------------------

const state = {
  serverInfo: undefined,
  channels: new Map(), // id → channel
  services: new Map(), // id → service
  statuses: [],
  params: new Map(), // request id → parameters
  paramUpdates: [], // parameters sent unasked (subscriptions)
  messages: new Map(), // subscription id → [{timestamp, value}]
  responses: new Map(), // call id → {ok, value | message}
  graph: undefined,
  errors: [],
};

// The fcan server is the Foxglove SDK's, which speaks the protocol as
// `foxglove.sdk.v1` (the same messages as `foxglove.websocket.v1`, renamed); the client
// library leaves the subprotocol to the WebSocket it is given.
const ws = new WebSocket(args.url, ["foxglove.sdk.v1", FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });
client.on("error", (e) => state.errors.push(String(e?.message ?? e)));
client.on("serverInfo", (m) => (state.serverInfo = m));
client.on("status", (m) => state.statuses.push(m));
client.on("advertise", (cs) => cs.forEach((c) => state.channels.set(c.id, c)));
client.on("unadvertise", (ids) => ids.forEach((id) => state.channels.delete(id)));
client.on("advertiseServices", (ss) => ss.forEach((s) => state.services.set(s.id, s)));
client.on("unadvertiseServices", (ids) => ids.forEach((id) => state.services.delete(id)));
client.on("parameterValues", (m) =>
  m.id !== undefined ? state.params.set(m.id, m.parameters) : state.paramUpdates.push(...m.parameters),
);
client.on("connectionGraphUpdate", (m) => (state.graph = m));
client.on("message", (m) => {
  const text = new TextDecoder().decode(
    new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength),
  );
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    value = { unparsable: text };
  }
  const list = state.messages.get(m.subscriptionId) ?? [];
  list.push({ timestamp: m.timestamp, value });
  state.messages.set(m.subscriptionId, list);
});
client.on("serviceCallResponse", (m) => {
  const text = new TextDecoder().decode(
    new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength),
  );
  state.responses.set(m.callId, { ok: true, encoding: m.encoding, text });
});
client.on("serviceCallFailure", (m) => state.responses.set(m.callId, { ok: false, message: m.message }));

const byTopic = (topic) => [...state.channels.values()].find((c) => c.topic === topic);
const serviceNamed = (name) => [...state.services.values()].find((s) => s.name === name);

let nextRequest = 1;
async function getParams(names) {
  const id = `get-${nextRequest++}`;
  client.getParameters(names, id);
  return until("parameters", 15000, () => state.params.get(id));
}
async function setParams(params) {
  const id = `set-${nextRequest++}`;
  client.setParameters(params, id);
  return until("parameters", 15000, () => state.params.get(id));
}
const valueOf = (params, name) => params?.find((p) => p.name === name)?.value;
let nextCall = 1;
async function call(name, request) {
  const s = serviceNamed(name);
  const callId = nextCall++;
  client.sendServiceCallRequest({
    serviceId: s.id,
    callId,
    encoding: "json",
    data: new DataView(new TextEncoder().encode(JSON.stringify(request)).buffer),
  });
  return until("response", 10000, () => state.responses.get(callId));
}
/** Subscribes to a channel, returns the message list it fills. */
function watch(topic) {
  const c = byTopic(topic);
  const sub = client.subscribe(c.id);
  state.messages.set(sub, []);
  return { sub, list: () => state.messages.get(sub) ?? [] };
}
/**
 * Watches `topic` in Foxglove while `fcan topic echo -n n` prints it, then compares the
 * two: the n echoed samples must be a run of Foxglove's messages (consecutive, in order,
 * equal in every field), found by the sample number `key`. A periodic topic goes out at
 * its period with the value the node's application last wrote, so a number may repeat
 * (the frame went out again before the next sample) or be skipped; a repeat must carry
 * the same values. `moving` tells samples apart, to show the compared values change.
 */
async function compareNumbered(topic, key, n, moving) {
  const w = watch(topic);
  await until(topic, 5000, () => w.list().length >= 2);
  const echoed = (await fcan("topic", "echo", topic, "-n", String(n))).map((l) => l.value);
  const last = echoed[echoed.length - 1]?.[key];
  // Foxglove has everything up to the last echoed sample once it has a later one.
  await until(topic, 5000, () => w.list().some((m) => m.value[key] > last));
  client.unsubscribe(w.sub);
  const fox = w.list().map((m) => m.value);
  check(
    echoed.length === n && fox.length > n,
    `${topic}: fcan topic echo printed ${echoed.length} of ${n}; Foxglove got ${fox.length} meanwhile`,
    { echoed: echoed.length, foxglove: fox.length },
  );
  const back = fox.flatMap((v, i) =>
    i > 0 && (v[key] < fox[i - 1][key] || (v[key] === fox[i - 1][key] && !same(v, fox[i - 1]))) ? [[fox[i - 1], v]] : [],
  );
  check(
    back.length === 0,
    `${topic}: Foxglove's \`${key}\` never goes back, and a repeated one repeats the same values`,
    back.slice(0, 2),
  );
  const starts = fox.flatMap((v, i) => (v[key] === echoed[0]?.[key] ? [i] : []));
  const run = starts.find((i) => echoed.every((v, k) => fox[i + k] !== undefined && same(fox[i + k], v)));
  const firstDiff = starts.length
    ? echoed.findIndex((v, k) => !same(fox[starts[0] + k], v))
    : -1;
  check(
    echoed.length === n && run !== undefined,
    `${topic}: the ${n} samples fcan topic echo printed are a run of Foxglove's messages: consecutive, in order, equal in every field (by \`${key}\` ${echoed[0]?.[key]}…${last})`,
    starts.length === 0
      ? { notInFoxglove: echoed[0] }
      : { at: firstDiff, fcan: echoed[firstDiff], foxglove: fox[starts[0] + firstDiff] },
  );
  check(
    new Set(echoed.map(moving)).size > 1,
    `${topic}: the compared values change from sample to sample`,
    echoed.slice(0, 2),
  );
}
const errorsSince = (n) => state.statuses.slice(n).filter((s) => s.level === StatusLevel.ERROR);

async function main() {
  const opened = await until("open", 10000, () => ws.readyState === WebSocket.OPEN);
  if (!check(opened, `connected to ${args.url}`, `readyState ${ws.readyState}`)) return;
  check(ws.protocol === "foxglove.sdk.v1", "the server speaks foxglove.sdk.v1", ws.protocol);
  await until("serverInfo", 5000, () => state.serverInfo);
  const caps = state.serverInfo?.capabilities ?? [];
  check(
    ["clientPublish", "parameters", "services", "connectionGraph"].every((c) => caps.includes(c)) &&
      (state.serverInfo?.supportedEncodings ?? []).includes("json"),
    "serverInfo: clientPublish, parameters, services, connectionGraph; json accepted",
    state.serverInfo,
  );

  // ---- channels: every topic the CLI lists, with its fields as a JSON Schema ----------
  const topics = await fcan("topic", "list");
  check(topics.length > 0 && topics.some((t) => t.dir === "s2m"), `fcan topic list: ${topics.length} topics`, topics.slice(0, 2));
  const s2m = topics.filter((t) => t.dir === "s2m");
  await until("channels", 30000, () => topics.every((t) => byTopic(t.name)));
  const missing = topics.filter((t) => !byTopic(t.name)).map((t) => t.name);
  check(
    missing.length === 0,
    `every topic fcan lists is a channel (${s2m.length} s2m, ${topics.length - s2m.length} m2s)`,
    missing.slice(0, 5),
  );
  const badSchema = [];
  for (const t of topics) {
    const c = byTopic(t.name);
    if (!c) continue;
    let schema;
    try {
      schema = JSON.parse(c.schema);
    } catch {
      badSchema.push([t.name, "schema is not JSON"]);
      continue;
    }
    const fields = fieldList(t.fields);
    const names = fields.map(([n]) => n);
    const problems = [];
    if (c.encoding !== "json") problems.push(`encoding ${c.encoding}`);
    if (c.schemaEncoding !== "jsonschema") problems.push(`schemaEncoding ${c.schemaEncoding}`);
    if (schema.type !== "object") problems.push(`type ${schema.type}`);
    if (JSON.stringify(schema.required) !== JSON.stringify(names))
      problems.push(`required ${JSON.stringify(schema.required)} vs ${JSON.stringify(names)}`);
    if (JSON.stringify(Object.keys(schema.properties ?? {})) !== JSON.stringify(names))
      problems.push("properties not in the schema's field order");
    for (const [n, ty, isArray] of fields) {
      const p = schema.properties?.[n];
      const one = isArray ? p?.items : p;
      const types = [].concat(one?.type);
      if (!p || (isArray && p.type !== "array") || !types.includes(schemaType(ty)))
        problems.push(`field ${n}: ${ty}${isArray ? "[]" : ""} vs ${JSON.stringify(p)}`);
    }
    if (problems.length) badSchema.push([t.name, problems]);
  }
  check(
    badSchema.length === 0,
    "every channel: json with a JSON Schema of the topic's fields, in order, typed as fcan lists them",
    badSchema.slice(0, 3),
  );

  // ---- a feedback stream, compared with fcan topic echo --------------------------------
  const fbTopic = "/motor_driver1/motor0/feedback";
  const fbSchema = JSON.parse(byTopic(fbTopic)?.schema ?? "{}");
  const fb = watch(fbTopic);
  await until("feedback", 5000, () => fb.list().length >= 20);
  const got = fb.list().slice();
  client.unsubscribe(fb.sub);
  check(got.length >= 20, `${fbTopic}: 20 messages within 5 s`, got.length);
  const malformed = got.filter(
    ({ value }) =>
      JSON.stringify(Object.keys(value)) !== JSON.stringify(fbSchema.required) ||
      !Object.entries(value).every(([k, v]) => ofType(v, fbSchema.properties[k])),
  );
  check(
    got.length > 0 && malformed.length === 0,
    "every feedback message has exactly the schema's fields, each of its type",
    malformed[0]?.value ?? got[0]?.value,
  );
  const now = BigInt(Date.now()) * 1000000n;
  const times = got.map((m) => m.timestamp);
  check(
    times.length > 1 &&
      times.every((t, i) => i === 0 || t >= times[i - 1]) &&
      times.every((t) => (t > now ? t - now : now - t) < 60n * 1000000000n),
    "log times are Unix nanoseconds, never going back",
    times.slice(0, 3).map(String),
  );
  const echoed = (await fcan("topic", "echo", fbTopic, "-n", "5")).map((l) => l.value);
  check(echoed.length === 5, "fcan topic echo --json prints 5 samples", echoed.length);
  const shape = (v) => Object.entries(v).map(([k, x]) => `${k}:${kind(x)}`).join(",");
  check(
    echoed.length > 0 && got.length > 0 && echoed.every((v) => shape(v) === shape(got[0].value)),
    "Foxglove's messages and fcan's echo have the same fields, in order, of the same kinds",
    { foxglove: got[0] && shape(got[0].value), fcan: echoed[0] && shape(echoed[0]) },
  );
  if (demoDrives) {
    // The demo moves motor0 all the time and the feedback carries no sample number, so a
    // Foxglove message and an echoed sample cannot be paired: here only the motion is
    // checked; values are compared exactly on numbered samples below.
    const pos = [...got.map((m) => m.value.position), ...echoed.map((v) => v.position)];
    check(
      pos.every((p) => Number.isFinite(p) && Math.abs(p) < 5) && new Set(got.map((m) => m.value.position)).size > 1,
      "motor0 follows the demo's ±2 rev sine in both (moving, within ±5)",
      pos.slice(0, 6),
    );
  } else {
    // Nobody commands motor0: its feedback holds still, so every message either face
    // shows must be the same, field for field.
    const first = got[0]?.value;
    const differ = [...got.map((m) => m.value), ...echoed].filter((v) => !same(v, first));
    check(
      got.length > 0 && echoed.length > 0 && differ.length === 0,
      `motor0, commanded by nobody: all ${got.length} Foxglove messages and ${echoed.length} echoed samples are equal, field for field`,
      { first, differ: differ.slice(0, 2) },
    );
  }

  // ---- numbered samples, compared one by one with fcan topic echo -----------------------
  // Two topics number their samples: /io_board3/analog/samples (`sequence` +1 per sample,
  // 100 Hz, beside 16 values of a triangle wave that change every sample) and
  // /io_board3/in0/edge (`count` +1 per edge, every 250 ms). Both faces get every sample
  // the master delivers, so what the echo printed must be a stretch of what Foxglove
  // showed, exactly.
  await compareNumbered("/io_board3/analog/samples", "sequence", 50, (v) => JSON.stringify(v.raw));
  await compareNumbered("/io_board3/in0/edge", "count", 4, (v) => v.level);

  // ---- parameters ----------------------------------------------------------------------
  const listed = await fcan("param", "list");
  const kpListed = listed.find((p) => p.name === param("velocity.kp"));
  check(kpListed !== undefined, `fcan param list lists ${param("velocity.kp")}`, listed.slice(0, 2));
  const all = await getParams([]);
  const allNames = new Set((all ?? []).map((p) => p.name));
  check(
    all !== undefined && listed.every((p) => allNames.has(p.name)),
    `getParameters([]) returns every parameter fcan lists (${listed.length}), read from the nodes`,
    listed.filter((p) => !allNames.has(p.name)).slice(0, 5).map((p) => p.name),
  );
  const bounds = await getParams([param("velocity.kp/min"), param("velocity.kp/max")]);
  check(
    valueOf(bounds, param("velocity.kp/min")) === kpListed?.min &&
      valueOf(bounds, param("velocity.kp/max")) === kpListed?.max &&
      kpListed?.max === 100,
    "the bounds are read-only parameters <name>/min and /max, as fcan lists them (0, 100)",
    { foxglove: bounds, fcan: kpListed },
  );
  let set = await setParams([{ name: param("velocity.kp"), value: 0.05, type: "float64" }]);
  check(
    Math.abs(valueOf(set, param("velocity.kp")) - 0.05) < 1e-6,
    "setParameters kp = 0.05 answers the node's value 0.05",
    set,
  );
  await setParams([{ name: param("velocity.ki"), value: 1.0, type: "float64" }]);
  const read = await getParams([param("velocity.kp")]);
  check(Math.abs(valueOf(read, param("velocity.kp")) - 0.05) < 1e-6, "getParameters reads 0.05 back from the node", read);
  const cliRead = await fcan("param", "get", param("velocity.kp"));
  check(
    cliRead.length === 1 && Math.abs(cliRead[0].value - 0.05) < 1e-6,
    "fcan param get agrees: 0.05",
    cliRead,
  );
  let mark = state.statuses.length;
  set = await setParams([{ name: param("velocity.kp"), value: 500.0, type: "float64" }]);
  await until("status", 3000, () => errorsSince(mark).length > 0);
  const refusal = errorsSince(mark).map((s) => s.message).join(" | ");
  check(
    refusal.includes(param("velocity.kp")) && refusal.includes("100"),
    "kp = 500 is refused with an error status naming the parameter and the bound 100",
    refusal || state.statuses.slice(mark),
  );
  check(
    Math.abs(valueOf(set, param("velocity.kp")) - 0.05) < 1e-6,
    "the refused set answers the node's current value (0.05), unchanged",
    set,
  );
  mark = state.statuses.length;
  await setParams([{ name: param("velocity.kp/max"), value: 1000 }]);
  await until("status", 3000, () => errorsSince(mark).length > 0);
  check(
    errorsSince(mark).some((s) => s.message.includes("read-only")),
    "writing a bound is refused: read-only",
    state.statuses.slice(mark),
  );
  // A write made elsewhere (the CLI, through the remote API) reaches subscribers too.
  client.subscribeParameterUpdates([param("velocity.ki")]);
  await new Promise((r) => setTimeout(r, 200));
  await fcan("param", "set", param("velocity.ki"), "2.5");
  const heard = await until("parameter update", 5000, () =>
    state.paramUpdates.find((p) => p.name === param("velocity.ki") && Math.abs(p.value - 2.5) < 1e-6),
  );
  check(
    heard !== undefined,
    "subscribeParameterUpdates: a value set with fcan param set reaches the subscriber",
    state.paramUpdates,
  );

  // ---- services --------------------------------------------------------------------------
  const services = await fcan("service", "list");
  const missingServices = services.filter((s) => !serviceNamed(s.name)).map((s) => s.name);
  check(
    services.length > 0 && missingServices.length === 0,
    `every service fcan lists is advertised (${services.length})`,
    missingServices.slice(0, 5),
  );
  const reset = serviceNamed(`${motor}/reset_encoder`);
  const reqSchema = JSON.parse(reset?.request?.schema ?? "{}");
  const respSchema = JSON.parse(reset?.response?.schema ?? "{}");
  check(
    reset?.request?.encoding === "json" &&
      reset?.request?.schemaEncoding === "jsonschema" &&
      JSON.stringify(reqSchema.required) === '["offset","value"]' &&
      JSON.stringify(respSchema.required) === '["success"]',
    `${motor}/reset_encoder: json request {offset, value} and response {success} with JSON Schemas`,
    reset,
  );
  let resp = await call(`${motor}/reset_encoder`, { offset: false, value: 42.0 });
  check(resp?.ok && JSON.parse(resp.text).success === true, "reset_encoder answers {success: true}", resp);
  const fb2 = watch(`${motor}/feedback`);
  await until("feedback", 3000, () => fb2.list().length >= 5);
  const at42 = fb2.list().slice(-5).map((m) => m.value.position);
  check(at42.length === 5 && at42.every((p) => Math.abs(p - 42) < 0.1), "after reset_encoder the position reads 42", at42);
  resp = await call(`${motor}/reset_encoder`, { offset: "yes" });
  check(resp && !resp.ok && /offset|value/.test(resp.message), "a malformed request fails with the reason", resp);

  // ---- a refusal by the node itself, not by the master -----------------------------------
  // Out-of-range parameters never reach a node: the master checks them first, against the
  // node's own blob and with the node's own check (fcan_core::types::check_range), so no
  // value passes the master that the example nodes' range check refuses. What only the
  // node refuses: a second `set` of an output while the first is still settling — the io
  // board's firmware answers BUSY (examples/io-board/src/lib.rs). min_on_ms (settable up to
  // 5000) makes a switch take 600 ms.
  const out = "io_board3.out5";
  resp = await call(`/io_board3/out5/set`, { on: false }); // a known start, on a rerun too
  check(resp?.ok, "out5 switched off first", resp);
  set = await setParams([{ name: `${out}.min_on_ms`, value: 600 }]);
  check(valueOf(set, `${out}.min_on_ms`) === 600, `setParameters ${out}.min_on_ms = 600`, set);
  const outWatch = watch("/io_board3/out5/state");
  const switching = call(`/io_board3/out5/set`, { on: true });
  await sleep(150);
  resp = await call(`/io_board3/out5/set`, { on: false });
  check(
    resp && !resp.ok && resp.message.includes("Busy") && resp.message.includes("try again"),
    "a second set while the first settles: the node answers BUSY, and the client gets a service call failure with the node's reason",
    resp,
  );
  const switched = await switching;
  const answer = switched?.ok ? JSON.parse(switched.text) : undefined;
  check(
    answer?.success === true && answer?.settle_ms === 600,
    "the first set completes: {success: true, settle_ms: 600} (the node's deferred reply)",
    switched,
  );
  await until("out5 on", 2000, () => outWatch.list().some((m) => m.value.on === true));
  await sleep(700);
  client.unsubscribe(outWatch.sub);
  const states = outWatch.list().map((m) => m.value.on);
  check(
    states.length > 0 && states[states.length - 1] === true,
    "out5/state ends on: the first set switched it, the refused one did not switch it off",
    states,
  );
  await setParams([{ name: `${out}.min_on_ms`, value: 0 }]);

  // ---- client publish: a command reaches the node ---------------------------------------
  const targetTopic = `${motor}/target`;
  const echo = watch(targetTopic); // an m2s channel shows every value the master publishes
  const chan = client.advertise({ topic: targetTopic, encoding: "json", schemaName: byTopic(targetTopic)?.schemaName });
  await sleep(100);
  fb2.list().length = 0;
  const enc = new TextEncoder();
  const started = Date.now();
  let sent = 0;
  while (Date.now() - started < 1500) {
    client.sendMessage(chan, enc.encode(JSON.stringify({ type: 1, value: 5.0 })));
    sent += 1;
    await sleep(10);
  }
  const during = fb2.list().slice();
  const top = Math.max(...during.map((m) => m.value.velocity));
  check(top > 2.5 && during.some((m) => m.value.ready), `published targets (${sent}, 5 rev/s) move the motor: velocity up to ${top.toFixed(2)}`, during.slice(-2));
  check(
    echo.list().some((m) => m.value.type === 1 && m.value.value === 5),
    "the m2s channel shows the published command",
    echo.list().slice(-1),
  );
  await sleep(500);
  const after = fb2.list().slice(-1)[0]?.value;
  check(after && after.ready === false, "0.5 s after the last message the node's command timeout has stopped it", after);

  mark = state.statuses.length;
  client.sendMessage(chan, enc.encode(JSON.stringify({ type: 1 })));
  await until("status", 3000, () => errorsSince(mark).length > 0);
  check(
    errorsSince(mark).some((s) => s.message.includes(targetTopic)),
    "a message missing a field is refused with an error status naming the topic",
    state.statuses.slice(mark),
  );
  mark = state.statuses.length;
  const wrong = client.advertise({ topic: `${motor}/feedback`, encoding: "json", schemaName: "x" });
  await sleep(100);
  client.sendMessage(wrong, enc.encode(JSON.stringify({ ready: true, position: 0, velocity: 0, current: 0 })));
  await until("status", 3000, () => errorsSince(mark).length > 0);
  check(
    errorsSince(mark).some((s) => s.message.includes("s2m")),
    "publishing on a node's s2m topic is refused (error status)",
    state.statuses.slice(mark),
  );
  client.unadvertise(chan);
  client.unadvertise(wrong);

  // ---- the topic graph -----------------------------------------------------------------
  client.subscribeConnectionGraph();
  await until("graph", 3000, () => state.graph);
  const pub = state.graph?.publishedTopics?.find((t) => t.name === fbTopic);
  const prov = state.graph?.advertisedServices?.find((s) => s.name === `${motor}/reset_encoder`);
  check(
    pub?.publisherIds?.includes("motor_driver1") && prov?.providerIds?.includes(node),
    "the connection graph: nodes publish their feedback and provide their services",
    { pub, prov },
  );
  check(state.errors.length === 0, "the client saw no protocol error", state.errors.slice(0, 3));
}

try {
  await main();
} catch (e) {
  check(false, "the test ran to the end", e?.stack ?? String(e));
}
client.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
