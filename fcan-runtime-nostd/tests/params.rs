//! Parameters: defaults, PARAM_SET accepted and rejected (NaN, range, type, length,
//! index, wiring), PARAM_GET, and the changed mask after a commit.

mod common;
use common::*;

use fcan_core::id::Opcode;
use fcan_core::msg::*;

fn set(rig: &mut Rig, block: u8, param: u8, commit: bool, value: &[u8]) -> CommandResult {
    let r = rig.command(ConfigMessage::ParamSet(ParamSet {
        block,
        param,
        commit,
        value,
    }));
    assert_eq!(r.opcode, Opcode::ParamSet);
    r
}

fn provisioned() -> Rig {
    let mut rig = Rig::new(false);
    rig.boot_and_ack(BusMode::Classic);
    rig
}

#[test]
fn defaults_at_boot() {
    let node = new_node(false);
    assert_eq!(node.param(0, P_GAIN), Some(&1.0f32.to_le_bytes()[..]));
    assert_eq!(node.param(3, P_ENABLE), Some(&[0u8][..]));
    assert_eq!(node.param(2, P_GAIN), None, "unwired");
    assert_eq!(node.param(0, 5), None);
}

#[test]
fn accepted_value_is_written() {
    let mut rig = provisioned();
    assert!(set(&mut rig, 0, P_GAIN, false, &2.5f32.to_le_bytes()).is_ack());
    assert_eq!(rig.node.param(0, P_GAIN), Some(&2.5f32.to_le_bytes()[..]));
    // Bounds are inclusive; padding after the value is ignored.
    assert!(set(&mut rig, 0, P_GAIN, false, &[0, 0, 0x20, 0x41, 0xEE, 0xEE]).is_ack());
    assert_eq!(rig.node.param(0, P_GAIN), Some(&10.0f32.to_le_bytes()[..]));
    assert!(set(&mut rig, 1, P_ENABLE, false, &[1]).is_ack());
    assert_eq!(rig.node.param(1, P_ENABLE), Some(&[1u8][..]));
}

#[test]
fn rejected_values_keep_the_old_value() {
    let mut rig = provisioned();
    assert!(set(&mut rig, 0, P_GAIN, false, &3.0f32.to_le_bytes()).is_ack());
    let cases: [(u8, u8, Vec<u8>, ResultCode); 9] = [
        (
            0,
            P_GAIN,
            f32::NAN.to_le_bytes().to_vec(),
            ResultCode::NotFinite,
        ),
        (
            0,
            P_GAIN,
            f32::INFINITY.to_le_bytes().to_vec(),
            ResultCode::NotFinite,
        ),
        (
            0,
            P_GAIN,
            (-0.5f32).to_le_bytes().to_vec(),
            ResultCode::BelowMin,
        ),
        (
            0,
            P_GAIN,
            10.5f32.to_le_bytes().to_vec(),
            ResultCode::AboveMax,
        ),
        (0, P_GAIN, vec![0, 0, 0], ResultCode::BadLength),
        (0, P_ENABLE, vec![2], ResultCode::BadValue),
        (0, 9, vec![0; 4], ResultCode::BadIndex),
        (9, P_GAIN, vec![0; 4], ResultCode::BadIndex),
        (
            2,
            P_GAIN,
            1.0f32.to_le_bytes().to_vec(),
            ResultCode::NotWired,
        ),
    ];
    for (block, param, value, want) in cases.iter() {
        let r = set(&mut rig, *block, *param, false, value);
        assert_eq!(r.code, *want, "{block}/{param} {value:?}");
    }
    assert_eq!(rig.node.param(0, P_GAIN), Some(&3.0f32.to_le_bytes()[..]));
    assert_eq!(rig.node.param(0, P_ENABLE), Some(&[0u8][..]));
    assert_eq!(rig.node.counters().naks_sent, cases.len() as u32);
    // A rejected write does not mark the param changed.
    assert!(set(&mut rig, 1, P_ENABLE, true, &[1]).is_ack());
    assert_eq!(rig.app.changed, vec![(0, 0b01), (1, 0b10)]);
}

#[test]
fn commit_reports_changed_masks_per_block() {
    let mut rig = provisioned();
    assert!(set(&mut rig, 0, P_ENABLE, false, &[1]).is_ack());
    assert!(set(&mut rig, 3, P_GAIN, false, &4.0f32.to_le_bytes()).is_ack());
    assert!(rig.app.changed.is_empty(), "no callback before the commit");
    assert!(set(&mut rig, 0, P_GAIN, true, &5.0f32.to_le_bytes()).is_ack());
    // Bit i = param i in declaration order.
    assert_eq!(rig.app.changed, vec![(0, 0b11), (3, 0b01)]);
    rig.app.changed.clear();
    // The marks were cleared.
    assert!(set(&mut rig, 1, P_GAIN, true, &5.0f32.to_le_bytes()).is_ack());
    assert_eq!(rig.app.changed, vec![(1, 0b01)]);
}

#[test]
fn param_get_and_errors() {
    let mut rig = provisioned();
    let t = rig.send(ConfigMessage::ParamGet(ParamGet {
        block: 0,
        param: P_GAIN,
    }));
    let m = rig.one();
    assert_eq!(m.id.opcode, Opcode::ParamGet);
    assert_eq!(m.id.transfer, t);
    match m.decode() {
        ConfigMessage::ParamValue(v) => {
            assert_eq!((v.block, v.param), (0, P_GAIN));
            assert_eq!(v.value, &1.0f32.to_le_bytes());
        }
        other => panic!("{other:?}"),
    }
    let r = rig.command(ConfigMessage::ParamGet(ParamGet { block: 0, param: 7 }));
    assert_eq!((r.opcode, r.code), (Opcode::ParamGet, ResultCode::BadIndex));
    let r = rig.command(ConfigMessage::ParamGet(ParamGet { block: 4, param: 0 }));
    assert_eq!(r.code, ResultCode::NotWired);
}

#[test]
fn param_set_before_ack_is_bad_state() {
    let mut rig = Rig::new(false);
    rig.poll();
    rig.advance(listen_end() + 1_000);
    rig.take();
    let r = set(&mut rig, 0, P_GAIN, true, &2.0f32.to_le_bytes());
    assert_eq!(r.code, ResultCode::BadState);
    assert!(rig.app.changed.is_empty());
}

#[test]
fn malformed_commands_are_nakked_bad_length() {
    let mut rig = provisioned();
    // A PARAM_SET with only one byte, a START with two.
    use fcan_core::frame::Frame;
    use fcan_core::id::{ConfigId, Direction};
    let id = ConfigId::single(Opcode::ParamSet, Direction::ToNode, node_id(), 77);
    rig.inject(Frame::classic(id.can_id(), &[0]).unwrap());
    let m = rig.one();
    assert_eq!(m.id.transfer, 77);
    assert_eq!(m.result().code, ResultCode::BadLength);
    let id = ConfigId::single(Opcode::Start, Direction::ToNode, node_id(), 78);
    rig.inject(Frame::classic(id.can_id(), &[0, 1]).unwrap());
    assert_eq!(rig.one().result().code, ResultCode::BadLength);
    assert_eq!(rig.node.counters().rx_malformed, 2);
}
