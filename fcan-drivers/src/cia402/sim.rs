//! A simulated CiA 402 drive: NMT states and the boot-up message, a heartbeat producer
//! (0x1017) and consumer (0x1016 sub 1, the command watchdog: on expiry an EMCY 0x8130
//! and 0x6007's reaction), an SDO server over its object dictionary (the EDS's, or
//! [`Eds::default_dictionary`]), PDOs as mapped over SDO (their COB-IDs, transmission
//! type 1–240 taken as every SYNC, RPDOs applied at the next SYNC as synchronous RPDOs
//! are), the CiA 402 state machine ([`state::transition`]), and a motion model: csp
//! follows the target position, pp moves to it at one revolution per second, csv/pv
//! move at the target velocity, cst accelerates with the target torque.
//!
//! Tests reach it through [`SimCia402::inject_fault`], [`SimCia402::silence`],
//! [`SimCia402::without`] and the accessors.

use std::collections::BTreeMap;

use fcan_core::frame::Frame;

use super::eds::{Eds, Entry};
use super::sdo::{AbortCode, Dictionary, SdoServer};
use super::state::{self, State};
use super::wire::{self, Emcy, NmtCommand, NmtState};
use crate::sim::SimDevice;

/// A simulated drive's object dictionary.
#[derive(Clone, Debug)]
pub struct Od {
    objects: BTreeMap<(u16, u8), (Entry, Vec<u8>)>,
    /// Mapping and PDO objects refuse writes while operational.
    operational: bool,
}

impl Od {
    /// The dictionary of `eds` for node `node`, every object at its default.
    pub fn new(eds: &Eds, node: u8) -> Od {
        let objects = eds
            .objects
            .iter()
            .map(|(k, e)| {
                let v = e.default_value(node).unwrap_or(0);
                (*k, (e.clone(), v.to_le_bytes()[..e.size().min(8)].to_vec()))
            })
            .collect();
        Od {
            objects,
            operational: false,
        }
    }

    /// The value of `index:sub` as an unsigned number (little-endian), if it exists.
    pub fn u64(&self, index: u16, sub: u8) -> Option<u64> {
        let (_, v) = self.objects.get(&(index, sub))?;
        Some(v.iter().rev().fold(0, |a, &b| (a << 8) | u64::from(b)))
    }

    /// The value sign-extended from its size.
    pub fn i64(&self, index: u16, sub: u8) -> Option<i64> {
        let (e, _) = self.objects.get(&(index, sub))?;
        let bits = 8 * e.size().min(8) as u32;
        let u = self.u64(index, sub)?;
        Some(((u << (64 - bits)) as i64) >> (64 - bits))
    }

    fn set(&mut self, index: u16, sub: u8, v: i64) {
        if let Some((e, b)) = self.objects.get_mut(&(index, sub)) {
            *b = v.to_le_bytes()[..e.size().min(8)].to_vec();
        }
    }

    fn has_index(&self, index: u16) -> bool {
        self.objects
            .range((index, 0)..=(index, 255))
            .next()
            .is_some()
    }

    /// The mapping `map_index` holds: (index, sub, bits) per entry.
    fn mapping(&self, map_index: u16) -> Vec<(u16, u8, u8)> {
        let n = self.u64(map_index, 0).unwrap_or(0).min(8) as u8;
        (1..=n)
            .filter_map(|s| self.u64(map_index, s))
            .map(|m| ((m >> 16) as u16, (m >> 8) as u8, m as u8))
            .collect()
    }

    fn mappable(&self, m: u32) -> Result<u32, AbortCode> {
        let (i, s, bits) = ((m >> 16) as u16, (m >> 8) as u8, m as u8);
        match self.objects.get(&(i, s)) {
            Some((e, _)) if e.pdo_mappable && usize::from(bits) == 8 * e.size() => {
                Ok(u32::from(bits))
            }
            _ => Err(AbortCode::NOT_MAPPABLE),
        }
    }
}

impl Dictionary for Od {
    fn read(&self, index: u16, sub: u8) -> Result<Vec<u8>, AbortCode> {
        match self.objects.get(&(index, sub)) {
            Some((e, _)) if e.access == "wo" => Err(AbortCode::WRITE_ONLY),
            Some((_, v)) => Ok(v.clone()),
            None if self.has_index(index) => Err(AbortCode::NO_SUB),
            None => Err(AbortCode::NO_OBJECT),
        }
    }

    fn write(&mut self, index: u16, sub: u8, data: &[u8]) -> Result<(), AbortCode> {
        let Some((e, _)) = self.objects.get(&(index, sub)) else {
            return Err(if self.has_index(index) {
                AbortCode::NO_SUB
            } else {
                AbortCode::NO_OBJECT
            });
        };
        if !e.writable() {
            return Err(AbortCode::READ_ONLY);
        }
        if data.len() != e.size() {
            return Err(AbortCode::LENGTH);
        }
        let mut b = [0u8; 8];
        b[..data.len()].copy_from_slice(data);
        let v = u64::from_le_bytes(b);
        let pdo_comm = (0x1400..=0x15FF).contains(&index) || (0x1800..=0x19FF).contains(&index);
        let pdo_map = (0x1600..=0x17FF).contains(&index) || (0x1A00..=0x1BFF).contains(&index);
        if (pdo_comm || pdo_map) && self.operational {
            return Err(AbortCode::DEVICE_STATE);
        }
        if pdo_map {
            // CiA 301 §7.5.2.36: entries only while sub 0 is 0; sub 0 checks the whole.
            if sub == 0 {
                let mut bits = 0;
                for s in 1..=(v as u8) {
                    let m = self.u64(index, s).ok_or(AbortCode::INCOMPATIBLE)? as u32;
                    bits += self.mappable(m)?;
                }
                if bits > 64 {
                    return Err(AbortCode::PDO_LENGTH);
                }
            } else {
                if self.u64(index, 0) != Some(0) {
                    return Err(AbortCode::INCOMPATIBLE);
                }
                self.mappable(v as u32)?;
            }
        }
        self.set(index, sub, v as i64);
        Ok(())
    }
}

/// A simulated CiA 402 drive (module docs).
#[derive(Debug)]
pub struct SimCia402 {
    id: u8,
    eds: Eds,
    od: Od,
    sdo: SdoServer,
    nmt: NmtState,
    /// The boot-up is still to be sent.
    boot_pending: bool,
    next_hb: Option<u64>,
    /// The heartbeat consumer: when the watched node was last heard (`None`: not yet,
    /// not monitoring).
    consumer_heard: Option<u64>,
    state: State,
    cw_prev: u16,
    /// The RPDO bytes received since the last SYNC, per RPDO number.
    rpdo: BTreeMap<u16, Vec<u8>>,
    last_sync: Option<u64>,
    /// Position, increments (kept as f64 so slow motion accumulates).
    position: f64,
    /// Velocity, increments/s.
    velocity: f64,
    silenced: bool,
    pending: Vec<Frame>,
    syncs: u64,
}

impl SimCia402 {
    /// A drive at node `id` with the default dictionary.
    pub fn new(id: u8) -> SimCia402 {
        SimCia402::with_eds(id, &Eds::default_dictionary())
    }

    /// A drive at node `id` whose dictionary is `eds`'s.
    pub fn with_eds(id: u8, eds: &Eds) -> SimCia402 {
        SimCia402 {
            id,
            eds: eds.clone(),
            od: Od::new(eds, id),
            sdo: SdoServer::default(),
            nmt: NmtState::BootUp,
            boot_pending: true,
            next_hb: None,
            consumer_heard: None,
            state: State::SwitchOnDisabled,
            cw_prev: 0,
            rpdo: BTreeMap::new(),
            last_sync: None,
            position: 0.0,
            velocity: 0.0,
            silenced: false,
            pending: Vec::new(),
            syncs: 0,
        }
    }

    /// The same drive lacking object `index` (every sub): SDO answers "object does not
    /// exist".
    pub fn without(mut self, index: u16) -> SimCia402 {
        self.eds.objects.retain(|(i, _), _| *i != index);
        self.od.objects.retain(|(i, _), _| *i != index);
        self
    }

    /// Its object dictionary.
    pub fn od(&self) -> &Od {
        &self.od
    }

    /// Its NMT state.
    pub fn nmt(&self) -> NmtState {
        self.nmt
    }

    /// Its CiA 402 state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Its position, increments.
    pub fn position(&self) -> f64 {
        self.position
    }

    /// SYNCs it took while operational.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// A fault: EMCY `code` (error register bit 0, generic) and the Fault state.
    pub fn inject_fault(&mut self, code: u16) {
        self.state = State::Fault;
        self.velocity = 0.0;
        self.od.set(0x603F, 0, i64::from(code));
        if !self.silenced {
            self.pending.push(wire::emcy(
                self.id,
                &Emcy {
                    code,
                    register: 0x01,
                    data: [0xA1, 0xA2, 0xA3, 0xA4, 0xA5],
                },
            ));
        }
    }

    /// Silenced, it sends and answers nothing (a cut cable); unsilenced it goes on.
    pub fn silence(&mut self, silent: bool) {
        self.silenced = silent;
    }

    /// Powered off and on: everything at its default, a boot-up at the next poll.
    pub fn reboot(&mut self) {
        let s = SimCia402::with_eds(self.id, &self.eds);
        let silenced = self.silenced;
        *self = s;
        self.silenced = silenced;
    }

    fn reset_communication(&mut self) {
        let fresh = Od::new(&self.eds, self.id);
        for (k, v) in fresh.objects {
            if (0x1000..=0x1FFF).contains(&k.0) {
                self.od.objects.insert(k, v);
            }
        }
        self.nmt = NmtState::BootUp;
        self.boot_pending = true;
        self.next_hb = None;
        self.consumer_heard = None;
        self.rpdo.clear();
    }

    fn hb_period(&self) -> Option<u64> {
        let ms = self.od.u64(0x1017, 0).unwrap_or(0);
        (ms > 0).then_some(ms * 1000)
    }

    fn consumer(&self) -> Option<(u8, u64)> {
        let v = self.od.u64(0x1016, 1)?;
        let (node, ms) = (((v >> 16) & 0x7F) as u8, v & 0xFFFF);
        (node != 0 && ms != 0).then_some((node, ms * 1000))
    }

    /// The valid PDOs of kind `comm_base` (0x1400 RPDO, 0x1800 TPDO): (number, COB-ID,
    /// transmission type).
    fn pdos(&self, comm_base: u16) -> Vec<(u16, u16, u8)> {
        (0..4)
            .filter_map(|n| {
                let cob = self.od.u64(comm_base + n, 1)?;
                let tt = self.od.u64(comm_base + n, 2).unwrap_or(255) as u8;
                (cob & 0x8000_0000 == 0).then_some((n, (cob & 0x7FF) as u16, tt))
            })
            .collect()
    }

    fn on_sync(&mut self, now: u64, out: &mut Vec<Frame>) {
        if self.nmt != NmtState::Operational {
            return;
        }
        self.syncs += 1;
        let dt = self
            .last_sync
            .map_or(0.0, |t| (now.saturating_sub(t) as f64 / 1e6).min(0.1));
        self.last_sync = Some(now);
        // Synchronous RPDOs take effect at this SYNC.
        for (n, data) in std::mem::take(&mut self.rpdo) {
            let mut at = 0usize;
            for (i, s, bits) in self.od.mapping(0x1600 + n) {
                let len = usize::from(bits / 8).min(8);
                let Some(b) = data.get(at..at + len) else {
                    break;
                };
                let mut v = [0u8; 8];
                v[..len].copy_from_slice(b);
                self.od.set(i, s, i64::from_le_bytes(v));
                at += len;
            }
        }
        let cw = self.od.u64(0x6040, 0).unwrap_or(0) as u16;
        if let Some((_, to)) = state::transition(self.state, self.cw_prev, cw) {
            self.state = to;
        }
        self.cw_prev = cw;
        self.motion(dt);
        self.publish_objects();
        for (n, cob, tt) in self.pdos(0x1800) {
            if !(1..=240).contains(&tt) {
                continue;
            }
            let mut data = Vec::new();
            for (i, s, bits) in self.od.mapping(0x1A00 + n) {
                let v = self.od.u64(i, s).unwrap_or(0).to_le_bytes();
                data.extend_from_slice(&v[..usize::from(bits / 8).min(8)]);
            }
            out.push(wire::pdo(cob, &data));
        }
    }

    fn motion(&mut self, dt: f64) {
        let mode = self.od.i64(0x6060, 0).unwrap_or(0);
        self.od.set(0x6061, 0, mode);
        let mut torque = 0.0;
        if self.state == State::OperationEnabled {
            match mode {
                8 => {
                    let t = self.od.i64(0x607A, 0).unwrap_or(0) as f64;
                    self.velocity = if dt > 0.0 {
                        (t - self.position) / dt
                    } else {
                        0.0
                    };
                    self.position = t;
                }
                1 => {
                    let t = self.od.i64(0x607A, 0).unwrap_or(0) as f64;
                    let vmax = self.od.u64(0x608F, 1).unwrap_or(4096) as f64;
                    let step = (t - self.position).clamp(-vmax * dt, vmax * dt);
                    self.velocity = if dt > 0.0 { step / dt } else { 0.0 };
                    self.position += step;
                }
                3 | 9 => {
                    self.velocity = self.od.i64(0x60FF, 0).unwrap_or(0) as f64;
                    self.position += self.velocity * dt;
                }
                10 => {
                    torque = self.od.i64(0x6071, 0).unwrap_or(0) as f64;
                    self.velocity += torque * 10.0 * dt;
                    self.position += self.velocity * dt;
                }
                _ => self.velocity = 0.0,
            }
        } else {
            self.velocity = 0.0;
        }
        self.od.set(0x6064, 0, self.position.round() as i64);
        self.od.set(0x606C, 0, self.velocity.round() as i64);
        self.od.set(0x6077, 0, torque.round() as i64);
    }

    fn publish_objects(&mut self) {
        let sw = self.state.statusword() | 0x0200; // bit 9 remote
        self.od.set(0x6041, 0, i64::from(sw));
    }

    fn watchdog_expired(&mut self) {
        // CiA 301 §7.2.8.3.2: heartbeat event → EMCY 0x8130; CiA 402 0x6007 reaction.
        self.pending.push(wire::emcy(
            self.id,
            &Emcy {
                code: 0x8130,
                register: 0x11,
                data: [0; 5],
            },
        ));
        let option = self.od.i64(0x6007, 0).unwrap_or(1);
        if matches!(
            self.state,
            State::OperationEnabled | State::SwitchedOn | State::ReadyToSwitchOn
        ) {
            self.state = match option {
                1 => State::Fault,
                2 => State::SwitchOnDisabled,
                3 if self.state == State::OperationEnabled => State::QuickStopActive,
                3 => State::SwitchOnDisabled,
                _ => self.state,
            };
            self.velocity = 0.0;
        }
        self.publish_objects();
    }
}

impl SimDevice for SimCia402 {
    fn describe(&self) -> String {
        format!("simulated cia402 node {}", self.id)
    }

    fn receive(&mut self, now_us: u64, frame: &Frame, out: &mut Vec<Frame>) {
        if self.silenced {
            return;
        }
        let Some(id) = wire::std_id(frame) else {
            return;
        };
        if let Some((cmd, node)) = wire::decode_nmt(frame) {
            if node != 0 && node != self.id {
                return;
            }
            match cmd {
                NmtCommand::Start => self.nmt = NmtState::Operational,
                NmtCommand::Stop => self.nmt = NmtState::Stopped,
                NmtCommand::PreOperational => self.nmt = NmtState::PreOperational,
                NmtCommand::ResetNode => self.reboot(),
                NmtCommand::ResetCommunication => self.reset_communication(),
            }
            self.od.operational = self.nmt == NmtState::Operational;
            return;
        }
        if let Some((node, _)) = wire::decode_heartbeat(frame) {
            if self.consumer().is_some_and(|(n, _)| n == node) {
                self.consumer_heard = Some(now_us);
            }
            return;
        }
        if wire::is_sync(frame) {
            self.on_sync(now_us, out);
            return;
        }
        if id == wire::SDO_RX + u16::from(self.id) {
            if matches!(self.nmt, NmtState::PreOperational | NmtState::Operational) {
                if let Some(a) = self.sdo.on_request(frame.data(), &mut self.od) {
                    out.push(wire::sdo_answer(self.id, a));
                }
                // 0x1017 written: the producer starts (or keeps its time).
                if self.next_hb.is_none() {
                    self.next_hb = self.hb_period().map(|p| now_us + p);
                }
            }
            return;
        }
        if self.nmt == NmtState::Operational {
            if let Some((n, _, _)) = self.pdos(0x1400).into_iter().find(|(_, cob, _)| *cob == id) {
                self.rpdo.insert(n, frame.data().to_vec());
            }
        }
    }

    fn poll_at(&self) -> Option<u64> {
        if self.boot_pending || !self.pending.is_empty() {
            return Some(0);
        }
        let consumer = self
            .consumer()
            .and_then(|(_, t)| self.consumer_heard.map(|h| h + t));
        [self.next_hb, consumer].into_iter().flatten().min()
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<Frame>) {
        if self.boot_pending {
            self.boot_pending = false;
            self.nmt = NmtState::PreOperational;
            self.od.operational = false;
            if !self.silenced {
                out.push(wire::heartbeat(self.id, NmtState::BootUp));
            }
            self.next_hb = self.hb_period().map(|p| now_us + p);
        }
        if let Some((_, t)) = self.consumer() {
            if self.consumer_heard.is_some_and(|h| now_us >= h + t) {
                self.consumer_heard = None;
                self.watchdog_expired();
            }
        }
        if self.next_hb.is_some_and(|t| now_us >= t) {
            if !self.silenced {
                out.push(wire::heartbeat(self.id, self.nmt));
            }
            self.next_hb = None;
        }
        // 0x1017 written since: the producer follows it.
        if self.next_hb.is_none() {
            self.next_hb = self.hb_period().map(|p| now_us + p);
        }
        let pending = std::mem::take(&mut self.pending);
        if !self.silenced {
            out.extend(pending);
        }
    }
}
