//! Fake fcan nodes on a PC: any schema, known only at run time, run by the firmware's own
//! node runtime ([`fcan_runtime_nostd::Node`], unchanged), so a master, a CLI or a
//! control loop can be tested with no device and no second implementation of the node
//! side.
//!
//! - [`FakeSchema`]: a schema blob decoded, validated, numbered and laid out by the same
//!   `fcan-core` functions code generation uses, with the runtime's tables
//!   ([`fcan_runtime_nostd::codegen::NodeDesc`]) built from it: equal to the ones `fcan-codegen`
//!   generates for the same schema (tested on the example firmwares).
//! - [`VecStorage`]: the runtime's RAM on the heap, sized as the generated `Buffers`.
//! - [`FakeNode`]: one node, sans I/O like the runtime (frames and time in, frames out):
//!   it announces, serves its blob, takes the plan, parameters (the runtime enforces
//!   their ranges) and service calls (answered at once with a zeroed response), and
//!   copies commanded values into feedback through a [`Mirror`].
//! - [`run`]: the host loop that drives a fake node on any `fcan_transport` link (the
//!   simulated bus, SocketCAN).
//!
//! `fcan fake` (in `fcan-cli`) is the command line over this crate; `docs/fake.md` is its
//! guide.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod desc;
mod firmware;
mod mirror;
pub mod run;
mod storage;

use std::collections::VecDeque;
use std::sync::Arc;

pub use desc::{node_desc, DescError, FakeSchema};
use firmware::FakeFirmware;
pub use firmware::FAKE_IMAGE_CAPACITY;
pub use mirror::{Mirror, MirrorError, Routes};
pub use storage::VecStorage;

use fcan_core::frame::Frame;
use fcan_core::id::NodeId;
use fcan_core::msg::DataDirection;
use fcan_runtime_nostd::codegen::{Dispatch, NodeDesc, ServiceCall, ServiceOutcome};
use fcan_runtime_nostd::{ConfigError, Context, Controller, Event, Node, NodeConfig, Transmit};

/// How one fake node boots.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Its node id.
    pub node_id: NodeId,
    /// Its boot id (random per run, as a board draws one at each boot).
    pub boot_id: u32,
    /// Instances wired, one per instance array; `None`: every array at its `max_count`.
    pub counts: Option<Vec<u8>>,
    /// Whether it sends and takes CAN FD frames (as the link allows).
    pub fd_capable: bool,
    /// Which commands it copies into which feedback.
    pub mirror: Mirror,
}

/// Why a fake node cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    /// A mirror rule does not fit the schema.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// The runtime refused its configuration (instance counts over `max_count`...).
    #[error("the node runtime refused the configuration: {0:?}")]
    Config(ConfigError),
    /// Bad instance counts.
    #[error("{0}")]
    Counts(String),
}

/// What a fake node did that its user may want to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FakeEvent {
    /// From the runtime (acknowledged, started, master lost...).
    Node(Event),
    /// The master committed parameter writes to a block: bit `i` of `changed` is param
    /// `i` of its type.
    ParamsChanged {
        /// Block number.
        block: u8,
        /// Changed mask.
        changed: u32,
    },
    /// A service was called and answered with its default (zeroed) response.
    Service {
        /// Block number.
        block: u8,
        /// Service index within the block's type.
        service: u8,
    },
    /// A firmware update was verified and the node rebooted into it: with the new
    /// schema (`booted`), or with the one it had when the image is not a schema blob.
    Rebooted {
        /// The new boot id.
        boot_id: u32,
        /// Whether the new image booted.
        booted: bool,
    },
}

/// Counters of a fake node's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeStats {
    /// Service calls answered (with the default response).
    pub services: u64,
    /// Parameter commits (batches of PARAM_SET).
    pub param_commits: u64,
    /// Feedback topics published because a mirrored command changed.
    pub mirrored: u64,
    /// Command values a mirror could not read (a bool byte neither 0 nor 1).
    pub mirror_errors: u64,
}

/// Most events kept for [`FakeNode::take_events`]; older ones are dropped first.
const EVENT_BACKLOG: usize = 256;

/// The application side of the runtime: default answers, counted.
struct App {
    desc: &'static NodeDesc,
    stats: FakeStats,
    events: VecDeque<FakeEvent>,
    /// Present when the node takes firmware updates.
    firmware: Option<FakeFirmware>,
}

impl App {
    fn note(&mut self, e: FakeEvent) {
        if self.events.len() == EVENT_BACKLOG {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}

impl Dispatch for App {
    fn service(
        &mut self,
        _cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome {
        // The runtime hands only valid, wired blocks and service indices; the response
        // buffer is at least the response size.
        let size = self
            .desc
            .block(call.block)
            .and_then(|(_, t)| t.services.get(call.service as usize))
            .map_or(0, |s| s.response_size as usize);
        let Some(out) = response.get_mut(..size) else {
            return ServiceOutcome::Failed;
        };
        out.fill(0);
        self.stats.services += 1;
        self.note(FakeEvent::Service {
            block: call.block,
            service: call.service,
        });
        ServiceOutcome::Done(size)
    }

    fn params_changed(&mut self, _cx: &mut Context<'_>, block: u8, changed: u32) {
        self.stats.param_commits += 1;
        self.note(FakeEvent::ParamsChanged { block, changed });
    }

    fn event(&mut self, event: Event) {
        self.note(FakeEvent::Node(event));
    }

    fn update(&mut self) -> Option<&mut dyn fcan_runtime_nostd::update::Update> {
        self.firmware
            .as_mut()
            .map(|f| f as &mut dyn fcan_runtime_nostd::update::Update)
    }
}

/// One fake node: a schema run by the firmware's runtime on the PC. Sans I/O: feed it
/// frames with [`FakeNode::receive`], call [`FakeNode::poll`] often with the time, send
/// what it transmits. [`run::run_fake`] does that on a transport.
pub struct FakeNode {
    schema: Arc<FakeSchema>,
    node: Node<VecStorage>,
    app: App,
    routes: Routes,
    /// Per source of `routes`, the command's generation last mirrored.
    seen: Vec<u32>,
    name: String,
    /// How it booted (to boot it again after a firmware update).
    config: FakeConfig,
}

impl std::fmt::Debug for FakeNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeNode")
            .field("name", &self.name)
            .field("state", &self.node.state())
            .field("stats", &self.app.stats)
            .finish_non_exhaustive()
    }
}

impl FakeNode {
    /// Boots a fake node of `schema`: checks the mirror against the schema and the
    /// counts against the arrays, configures the runtime (parameters at their defaults),
    /// and stages every on-commit feedback topic once with its default value, so each
    /// goes out once after START as a board's first publish would.
    pub fn new(schema: Arc<FakeSchema>, config: FakeConfig) -> Result<FakeNode, FakeError> {
        let routes = config.mirror.resolve(&schema)?;
        let desc = schema.desc;
        let counts = match &config.counts {
            Some(c) => c.clone(),
            None => desc.arrays.iter().map(|a| a.max_count).collect(),
        };
        let node = Node::new(
            desc,
            VecStorage::new(desc, &schema.arena),
            NodeConfig {
                node_id: config.node_id,
                boot_id: config.boot_id,
                counts: &counts,
                controller: if config.fd_capable {
                    Controller::Fd
                } else {
                    Controller::Classic
                },
            },
        )
        .map_err(|e| match e {
            ConfigError::CountTooLarge { array } => FakeError::Counts(format!(
                "instance array {} ({}) has at most {} instances",
                array,
                schema
                    .schema
                    .instances
                    .get(array as usize)
                    .map_or("?", |a| a.ns.as_str()),
                desc.arrays.get(array as usize).map_or(0, |a| a.max_count)
            )),
            e => FakeError::Config(e),
        })?;
        let name = schema
            .schema
            .node
            .replace("{i}", &config.node_id.get().to_string());
        let mut fake = FakeNode {
            seen: vec![0; routes.sources.len()],
            routes,
            app: App {
                desc,
                stats: FakeStats::default(),
                events: VecDeque::new(),
                firmware: None,
            },
            node,
            schema,
            name,
            config,
        };
        for (block, bd) in desc.blocks.iter().enumerate() {
            let Some(td) = desc.types.get(bd.type_index as usize) else {
                continue;
            };
            for (t, tp) in td.topics.iter().enumerate() {
                if tp.dir == DataDirection::S2m && tp.period_us == 0 {
                    // Unwired blocks refuse; nothing else can fail on our own tables.
                    let _ = fake
                        .node
                        .publish(block as u8, t as u8, &vec![0; tp.size as usize]);
                }
            }
        }
        Ok(fake)
    }

    /// A frame from the bus, at `now_us` (the node's wrapping microsecond clock).
    pub fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.node.receive(frame, now_us);
    }

    /// The node's work at `now_us`: mirrors the commands that changed since the last
    /// poll into their feedback, then runs the runtime (handlers, timers, due frames),
    /// which hands frames to `tx`.
    pub fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.mirror();
        self.node.poll(now_us, tx, &mut self.app);
        self.reboot_if_asked();
    }

    /// Makes the node take firmware updates over the bus (it announces the capability
    /// from its next poll on), reporting `version` as the firmware it runs. Its firmware
    /// is its schema blob: an image written into it is the blob of the schema the new
    /// build announces, and once verified the node reboots with that schema, the
    /// offered version and a new boot id. It accepts offers in every state (a fake
    /// drives nothing) up to [`FAKE_IMAGE_CAPACITY`] bytes.
    pub fn take_updates(&mut self, version: &str) {
        self.app.firmware = Some(FakeFirmware::new(version));
    }

    /// The version of the firmware it runs, when it takes updates.
    pub fn firmware_version(&self) -> Option<&str> {
        self.app.firmware.as_ref().map(|f| f.version())
    }

    /// After a verified update asked for it: boots again from the new image (a schema
    /// blob), or, when that is not a schema this fake can run, from the old one; either
    /// way with a new boot id, its parameters at their defaults, as a board after a reset.
    fn reboot_if_asked(&mut self) {
        let Some((image, version)) = self.app.firmware.as_mut().and_then(|f| f.take_reboot())
        else {
            return;
        };
        let mut config = self.config.clone();
        // A new boot draws a new boot id (a board draws a random one).
        config.boot_id = config
            .boot_id
            .wrapping_mul(0x9E37_79B9)
            .rotate_left(13)
            .wrapping_add(1);
        let backlog = std::mem::take(&mut self.app.events);
        let new = FakeSchema::from_blob(&image).ok().and_then(|schema| {
            // Counts for arrays the new schema no longer has would not fit it.
            let mut cfg = config.clone();
            if cfg
                .counts
                .as_ref()
                .is_some_and(|c| c.len() != schema.desc.arrays.len())
            {
                cfg.counts = None;
            }
            FakeNode::new(schema, cfg).ok()
        });
        let (mut next, booted, version) = match new {
            Some(n) => (n, true, version),
            None => {
                let old = self
                    .app
                    .firmware
                    .as_ref()
                    .map_or(String::new(), |f| f.version().to_owned());
                match FakeNode::new(self.schema.clone(), config) {
                    Ok(n) => (n, false, old),
                    // The schema and config booted before; nothing changed in them.
                    Err(_) => return,
                }
            }
        };
        next.take_updates(&version);
        next.app.events = backlog;
        next.app.stats = self.app.stats;
        let boot_id = next.config.boot_id;
        *self = next;
        self.app.note(FakeEvent::Rebooted { boot_id, booted });
    }

    /// Copies every command whose generation changed into its feedback topics and
    /// publishes each touched feedback topic once.
    fn mirror(&mut self) {
        let mut touched: Vec<((u8, u8), Vec<u8>)> = Vec::new();
        for (i, ((block, topic), copies)) in self.routes.sources.iter().enumerate() {
            let Some(cmd) = self.node.topic(*block, *topic) else {
                continue;
            };
            let Some(seen) = self.seen.get_mut(i) else {
                continue;
            };
            if cmd.generation == *seen {
                continue;
            }
            *seen = cmd.generation;
            for (to, copy) in copies {
                let buf = match touched.iter_mut().find(|(k, _)| k == to) {
                    Some((_, b)) => b,
                    None => {
                        let Some(now) = self.node.topic(to.0, to.1) else {
                            continue; // not wired
                        };
                        touched.push((*to, now.bytes.to_vec()));
                        &mut touched.last_mut().expect("just pushed").1
                    }
                };
                if !copy.apply(cmd.bytes, buf) {
                    self.app.stats.mirror_errors += 1;
                }
            }
        }
        for ((block, topic), bytes) in touched {
            if self.node.publish(block, topic, &bytes).is_ok() {
                self.app.stats.mirrored += 1;
            }
        }
    }

    /// The runtime node (state, counters, topic and parameter values).
    pub fn node(&self) -> &Node<VecStorage> {
        &self.node
    }

    /// The schema it runs.
    pub fn schema(&self) -> &Arc<FakeSchema> {
        &self.schema
    }

    /// Its name on the bus (`node:` with `{i}` the node id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its counters.
    pub fn stats(&self) -> FakeStats {
        self.app.stats
    }

    /// The mirror's checked routes.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The events since the last call (at most the last 256).
    pub fn take_events(&mut self) -> Vec<FakeEvent> {
        self.app.events.drain(..).collect()
    }

    /// An event in words, with the schema's names (`motor0.reset_encoder called`).
    pub fn describe(&self, e: &FakeEvent) -> String {
        let s = &self.schema.schema;
        let block = |b: u8| {
            let blk = self.schema.numbering.block(b);
            let ty = blk.and_then(|b| s.types.get(b.type_index));
            (blk.map_or(String::from("?"), |b| b.ns.clone()), ty)
        };
        match *e {
            FakeEvent::Node(ev) => format!("{ev:?}"),
            FakeEvent::Rebooted { boot_id, booted: true } => format!(
                "rebooted into the new firmware {} (boot {boot_id:#010x})",
                self.firmware_version().unwrap_or("?")
            ),
            FakeEvent::Rebooted { boot_id, booted: false } => format!(
                "rebooted (boot {boot_id:#010x}); the new image is not a schema blob, the old firmware runs"
            ),
            FakeEvent::ParamsChanged { block: b, changed } => {
                let (ns, ty) = block(b);
                let names: Vec<String> = ty
                    .map(|t| {
                        t.params
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| changed & (1u32 << i) != 0)
                            .map(|(_, p)| {
                                fcan_core::numbering::param_path(&self.name, &ns, &p.name)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!("params set: {}", names.join(", "))
            }
            FakeEvent::Service { block: b, service } => {
                let (ns, ty) = block(b);
                let name = ty
                    .and_then(|t| t.services.get(service as usize))
                    .map_or("?", |sv| sv.name.as_str());
                format!(
                    "{} called: default response",
                    fcan_core::numbering::topic_path(&self.name, &ns, name)
                )
            }
        }
    }
}

impl FakeSchema {
    /// Instance counts from `ARRAY=K` pairs, every other array at its `max_count`. An
    /// array is named by its `ns` with `*` for the index (`motor*`), its `ns` as written
    /// (`motor{i}`), or its type (`MdMotor`) when one array has that type.
    ///
    /// ```
    /// # let blob = fcan_core::blob::encode(&fcan_core::ir::Schema {
    /// #     protocol: 2, node: "n{i}".into(), allocation: "static".into(),
    /// #     limits: Default::default(),
    /// #     types: vec![fcan_core::ir::BlockType { name: "M".into(), params: vec![], topics: vec![], services: vec![] }],
    /// #     instances: vec![fcan_core::ir::InstanceArray { ty: "M".into(), max_count: 4, ns: "motor{i}".into() }],
    /// # });
    /// let s = fcan_fake::FakeSchema::from_blob(&blob).unwrap();
    /// assert_eq!(s.counts(&[("motor*".into(), 2)]).unwrap(), vec![2]);
    /// assert_eq!(s.counts(&[]).unwrap(), vec![4]);
    /// assert!(s.counts(&[("motor*".into(), 5)]).is_err());
    /// ```
    pub fn counts(&self, given: &[(String, u8)]) -> Result<Vec<u8>, FakeError> {
        let arrays = &self.schema.instances;
        let mut counts: Vec<u8> = self.desc.arrays.iter().map(|a| a.max_count).collect();
        let known = || {
            arrays
                .iter()
                .map(|a| {
                    format!(
                        "{} ({}, max {})",
                        a.ns.replace("{i}", "*"),
                        a.ty,
                        a.max_count
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (name, k) in given {
            let matches: Vec<usize> = arrays
                .iter()
                .enumerate()
                .filter(|(_, a)| {
                    a.ns == *name || a.ns.replace("{i}", "*") == *name || a.ty == *name
                })
                .map(|(i, _)| i)
                .collect();
            let i = match matches[..] {
                [i] => i,
                [] => {
                    return Err(FakeError::Counts(format!(
                        "--count {name}={k}: no instance array `{name}`; the arrays: {}",
                        known()
                    )))
                }
                _ => {
                    return Err(FakeError::Counts(format!(
                        "--count {name}={k}: several arrays have type `{name}`: name one by its ns ({})",
                        known()
                    )))
                }
            };
            if u32::from(*k) > arrays[i].max_count {
                return Err(FakeError::Counts(format!(
                    "--count {name}={k}: `{}` has at most {} instances",
                    arrays[i].ns, arrays[i].max_count
                )));
            }
            counts[i] = *k;
        }
        Ok(counts)
    }
}
