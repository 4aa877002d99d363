//! Frames arriving at a reassembly pool in any order, with any payloads and any clock,
//! plus whole messages sent through the segmenter.
//!
//! Checks: nothing panics; never more transfers in flight than slots; a multi-frame
//! message is never longer than the slot buffer; a single-frame transfer is returned as
//! it came; the drop counter never goes down; a message cut by the `Segmenter` comes
//! back whole (followed only by the last FD frame's zero padding).

#![no_main]

use arbitrary::Arbitrary;
use fcan_core::frame::Mtu;
use fcan_core::id::{ConfigId, Direction, NodeId, Opcode};
use fcan_core::segment::{max_transfer_len, ReassemblyPool, Segmenter, TransferKey};
use libfuzzer_sys::fuzz_target;

const SLOTS: usize = 3;
const N: usize = 200;

#[derive(Arbitrary, Debug)]
struct Id {
    opcode: u8,
    to_master: bool,
    node: u8,
    transfer: u8,
    segment: u8,
    eot: bool,
}

impl Id {
    fn get(&self) -> ConfigId {
        ConfigId {
            opcode: Opcode::ALL[self.opcode as usize % Opcode::ALL.len()],
            dir: if self.to_master {
                Direction::ToMaster
            } else {
                Direction::ToNode
            },
            // A small key space, so transfers collide.
            node: NodeId::new(self.node % 3).unwrap(),
            transfer: self.transfer % 4,
            segment: self.segment,
            eot: self.eot,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Step {
    Push {
        id: Id,
        data: Vec<u8>,
        dt: u32,
    },
    Expire {
        dt: u32,
    },
    Cancel {
        id: Id,
    },
    Send {
        id: Id,
        fd: bool,
        len: u16,
        split: u16,
        fill: u8,
    },
}

fuzz_target!(|steps: Vec<Step>| {
    let mut pool: ReassemblyPool<SLOTS, N> = ReassemblyPool::new();
    let mut now = 0u32;
    let mut dropped = 0;
    for step in steps {
        match step {
            Step::Push { id, data, dt } => {
                now = now.wrapping_add(dt);
                let id = id.get();
                let data = &data[..data.len().min(64)];
                if let Ok(Some(m)) = pool.push(id, data, now) {
                    assert!(id.eot);
                    if id.segment == 0 {
                        assert_eq!(m, data);
                    } else {
                        assert!(m.len() <= N);
                    }
                }
            }
            Step::Expire { dt } => {
                now = now.wrapping_add(dt);
                let before = pool.in_progress();
                let n = pool.expire(now);
                assert_eq!(pool.in_progress(), before - n);
            }
            Step::Cancel { id } => pool.cancel(TransferKey::from(id.get())),
            Step::Send {
                id,
                fd,
                len,
                split,
                fill,
            } => {
                let mtu = if fd { Mtu::Fd } else { Mtu::Classic };
                let len = len as usize % (max_transfer_len(mtu) + 1);
                let msg: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                let split = split as usize % (len + 1);
                let seg = Segmenter::new(id.get(), mtu, &msg[..split], &msg[split..])
                    .expect("fits one transfer");
                let count = seg.segment_count();
                let mut own: ReassemblyPool<1, 8192> = ReassemblyPool::new();
                let mut done = None;
                for (k, f) in seg.enumerate() {
                    let cid = ConfigId::from_can_id(f.id()).expect("segmenter ids parse");
                    assert_eq!(cid.segment as usize, k);
                    assert_eq!(cid.eot, k + 1 == count);
                    if let Some(m) = own.push(cid, f.data(), now).expect("in-order segments") {
                        done = Some(m.to_vec());
                    }
                }
                let done = done.expect("the last segment completes the transfer");
                assert_eq!(&done[..len], &msg[..]);
                assert!(done[len..].iter().all(|&b| b == 0));
                assert!(done.len() - len < if fd { 16 } else { 1 });
            }
        }
        assert!(pool.in_progress() <= SLOTS);
        assert!(pool.dropped() >= dropped);
        dropped = pool.dropped();
    }
});
