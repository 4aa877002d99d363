//! The node's firmware-update input (`docs/protocol.md` §3.14): arbitrary sequences of
//! OFFER, DATA, COMMIT, ABORT and QUERY (well-formed ones that follow a real image, and
//! raw UPDATE payloads), times, refusing transmitters and power cuts, against the
//! reference A/B flash. After every step: nothing panics, the flash always boots (the
//! old image, or an image that was offered and whose every byte was sent), and whatever
//! the node sends reassembles and decodes.
//!
//! The input is a little program: each op byte picks an action and reads its arguments
//! from the following bytes.
#![no_main]

use fcan_core::frame::{Frame, Mtu};
use fcan_core::hash::HashPrefix;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::msg::*;
use fcan_core::segment::{ReassemblyPool, Segmenter};
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::update::SimFlash;
use fcan_runtime_nostd::*;
use libfuzzer_sys::fuzz_target;
use sha2::Digest;

/// A schema blob whose `node` field names "fuzz_node"; the rest does not matter here.
static BLOB: [u8; 16] = *b"\x12\x09fuzz_node\x1a\x00\x00\x00\x00";
static DESC: NodeDesc = NodeDesc {
    blob: &BLOB,
    hash: HashPrefix([1, 2, 3, 4, 5, 6, 7, 8]),
    limits: LimitsDesc {
        max_frames: 1,
        max_copy_entries: 1,
        service_buffer: 16,
        service_reassembly: 0,
    },
    types: &[],
    arrays: &[],
    blocks: &[],
    topic_bytes: 0,
    stage_bytes: 0,
    param_bytes: 0,
    topic_slots: 0,
    max_request: 0,
    max_response: 0,
};
type B = Buffers<0, 0, 0, 0, 0, 1, 1, 0, 16>;

const NODE: u8 = 9;
const SLOT: usize = 2048;
const OLD: &[u8] = b"old firmware";

struct Tx {
    refuse_bits: u64,
    calls: u32,
    pool: ReassemblyPool<2, 8192>,
    now: u32,
}

impl Transmit for Tx {
    fn transmit(&mut self, frame: &Frame) -> Result<(), TxRefused> {
        self.calls = self.calls.wrapping_add(1);
        if self.refuse_bits & (1 << (self.calls % 64)) != 0 {
            return Err(TxRefused);
        }
        let id = ConfigId::from_can_id(frame.id()).expect("node sent a bad config id");
        assert_eq!(id.dir, Direction::ToMaster);
        if let Ok(Some(payload)) = self.pool.push(id, frame.data(), self.now) {
            if let Err(e) = ConfigMessage::decode(id.opcode, Direction::ToMaster, payload) {
                panic!("node sent an undecodable {:?}: {e:?}", id.opcode);
            }
        }
        Ok(())
    }
}

struct App {
    flash: SimFlash<SLOT>,
    with_flash: bool,
}

impl Dispatch for App {
    fn service(&mut self, _: &mut Context<'_>, _: ServiceCall<'_>, _: &mut [u8]) -> ServiceOutcome {
        ServiceOutcome::Failed
    }
    fn params_changed(&mut self, _: &mut Context<'_>, _: u8, _: u32) {}
    fn event(&mut self, _: Event) {}
    fn update(&mut self) -> Option<&mut dyn Update> {
        if self.with_flash {
            Some(&mut self.flash)
        } else {
            None
        }
    }
}

struct In<'a>(&'a [u8]);
impl In<'_> {
    fn u8(&mut self) -> u8 {
        let Some((b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        *b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fn new_node() -> Node<B> {
    let config = NodeConfig {
        node_id: NodeId::new(NODE).unwrap(),
        boot_id: 0xB007,
        counts: &[],
        controller: Controller::Fd,
    };
    Node::new(&DESC, B::new(), config).unwrap()
}

fn send(node: &mut Node<B>, to: NodeId, req: UpdateRequest<'_>, transfer: u8, mtu: Mtu, now: u32) {
    let mut buf = [0u8; 1024];
    let msg = ConfigMessage::UpdateRequest(req);
    let Ok(n) = msg.encode(&mut buf) else { return };
    send_raw(node, to, &buf[..n], transfer, mtu, now);
}

fn send_raw(node: &mut Node<B>, to: NodeId, payload: &[u8], transfer: u8, mtu: Mtu, now: u32) {
    let id = ConfigId::single(Opcode::Update, Direction::ToNode, to, transfer);
    let Ok(seg) = Segmenter::new(id, mtu, payload, &[]) else {
        return;
    };
    for f in seg {
        node.receive(&f, now);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = In(data);
    let cfg = input.u8();
    // Two images the program can send: sizes from the input, contents derived from them.
    let sizes = [1 + input.u16() as usize % SLOT, 1 + input.u16() as usize % (SLOT + 64)];
    let images: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| (0..n).map(|i| (i * 7 + k * 13) as u8).collect())
        .collect();
    let digests: Vec<[u8; 32]> = images.iter().map(|i| sha2::Sha256::digest(i).into()).collect();

    let mut app = App {
        flash: SimFlash::new(OLD, "1.0"),
        with_flash: cfg & 1 == 0,
    };
    app.flash.answer = match (cfg >> 1) % 4 {
        0 => None,
        1 => Some(Ok(())),
        2 => Some(Err(UpdateReason::LowBattery)),
        _ => Some(Err(UpdateReason::NotSafe)),
    };
    let mut node = new_node();
    let mut tx = Tx { refuse_bits: 0, calls: 0, pool: ReassemblyPool::new(), now: 0 };
    let mut now: u32 = u32::MAX - 2_000_000; // cross the clock wrap
    // Wait out the listen window (the node takes nothing in it).
    for _ in 0..500 {
        now = now.wrapping_add(1_000);
        node.poll(now, &mut tx, &mut app);
    }
    let node_id = NodeId::new(NODE).unwrap();
    let mut transfer = 0u8;
    let mut offered = 0usize;
    // The old image, or one of the two the program offers (whole: the boot record
    // names a SHA-256 the slot must match); never a mix, never nothing.
    let bootable = [OLD.to_vec(), images[0].clone(), images[1].clone()];

    for _ in 0..2048 {
        if input.0.is_empty() {
            break;
        }
        transfer = transfer.wrapping_add(1);
        let mtu = if input.u8() & 1 == 0 { Mtu::Classic } else { Mtu::Fd };
        match input.u8() % 10 {
            0 => {
                now = now.wrapping_add(u32::from(input.u16()) * 64);
            }
            1 => {
                // A well-formed OFFER of image 0 or 1, for this board or another.
                let k = usize::from(input.u8() & 1);
                offered = k;
                let node_name = if input.u8() & 7 == 0 { "other" } else { "fuzz_node" };
                let offer = UpdateOffer {
                    size: images[k].len() as u32,
                    image: digests[k],
                    schema: [0; 32],
                    node: node_name,
                    version: "2.0",
                };
                send(&mut node, node_id, UpdateRequest::Offer(offer), transfer, mtu, now);
            }
            2 | 3 => {
                // DATA of the offered image at an offset from the input, or random bytes.
                let img = &images[offered];
                let offset = (input.u16() as usize * 16) % (img.len() + 32);
                let len = input.u8() as usize * 2;
                let data: Vec<u8> = if input.u8() & 15 == 0 {
                    input.bytes(len).to_vec()
                } else {
                    img.get(offset..(offset + len).min(img.len())).unwrap_or(&[]).to_vec()
                };
                let req = UpdateRequest::Data { offset: offset as u32, data: &data };
                send(&mut node, node_id, req, transfer, mtu, now);
            }
            4 => {
                let image = if input.u8() & 3 == 0 { [input.u8(); 32] } else { digests[offered] };
                send(&mut node, node_id, UpdateRequest::Commit { image }, transfer, mtu, now);
            }
            5 => send(&mut node, node_id, UpdateRequest::Abort, transfer, mtu, now),
            6 => send(&mut node, NodeId::BROADCAST, UpdateRequest::Query, transfer, mtu, now),
            7 => {
                // A raw UPDATE payload, anything.
                let n = input.u8() as usize;
                let payload = input.bytes(n).to_vec();
                send_raw(&mut node, node_id, &payload, transfer, mtu, now);
            }
            8 => {
                tx.refuse_bits = u64::from_le_bytes(core::array::from_fn(|_| input.u8()));
            }
            _ => {
                // Power cut: the node's RAM is gone, the flash stays. A PC host or a
                // board restarts the node.
                node = new_node();
                for _ in 0..500 {
                    now = now.wrapping_add(1_000);
                    node.poll(now, &mut tx, &mut app);
                }
            }
        }
        for _ in 0..(input.u8() % 8) {
            now = now.wrapping_add(1_000);
            tx.now = now;
            node.poll(now, &mut tx, &mut app);
        }
        let boots = app.flash.boot().expect("the flash no longer boots");
        assert!(
            bootable.iter().any(|b| b == boots),
            "boots an image that was never offered whole"
        );
        if app.flash.reboots > 0 {
            // Rebooted into a new image: the test ends as a board's would.
            assert_ne!(boots, OLD, "rebooted without a new image");
            break;
        }
    }
});
