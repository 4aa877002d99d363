//! `Node::poll_at`: a node polled only at the deadlines it names (and after each frame
//! or publish) sends exactly what a node polled every 50 µs sends, at the same times
//! within that step, with a fraction of the polls.

mod common;
use common::*;

use fcan_core::frame::Frame;
use fcan_core::msg::*;
use fcan_runtime_nostd::codegen::*;
use fcan_runtime_nostd::*;

/// What the master and the application do, and when (µs after the start).
#[derive(Clone, Copy)]
enum Step {
    Publish,
    MasterHeartbeat,
    ParamGet,
}

const SCRIPT: [(u32, Step); 5] = [
    (150_000, Step::Publish),
    (200_000, Step::MasterHeartbeat),
    (260_000, Step::ParamGet),
    (1_700_000, Step::Publish),
    (1_900_000, Step::ParamGet),
];

/// Runs the script for 2.5 s from a running node (plan with a 10 ms periodic and an
/// on-commit frame, 300 ms master watchdog); `next_poll` picks the next poll time.
/// Returns the frames sent with their times, and the number of polls.
fn run(next_poll: impl Fn(&Rig, u32) -> u32) -> (Vec<(u32, Frame)>, usize) {
    let mut rig = running_rig();
    rig.data.clear();
    let start = rig.now;
    let end = start.wrapping_add(2_500_000);
    let mut sent = Vec::new();
    let mut script = SCRIPT.iter().peekable();
    let mut polls = 0;
    let mut transfer = 100u8;
    loop {
        let event = script.peek().map(|(t, _)| start.wrapping_add(*t));
        let mut at = next_poll(&rig, rig.now);
        if let Some(ev) = event {
            if (ev.wrapping_sub(rig.now) as i32) < (at.wrapping_sub(rig.now) as i32) {
                at = ev;
            }
        }
        if (at.wrapping_sub(end) as i32) > 0 {
            break;
        }
        rig.now = at;
        while let Some(&&(t, step)) = script.peek() {
            if (start.wrapping_add(t).wrapping_sub(rig.now) as i32) > 0 {
                break;
            }
            script.next();
            match step {
                Step::Publish => rig.node.publish(0, T_EVENT, &[1, 2, 3, 4]).unwrap(),
                Step::MasterHeartbeat | Step::ParamGet => {
                    transfer += 1;
                    let (to, msg) = match step {
                        Step::MasterHeartbeat => (
                            fcan_core::id::NodeId::BROADCAST,
                            ConfigMessage::MasterHeartbeat(MasterHeartbeat { session: SESSION }),
                        ),
                        _ => (
                            node_id(),
                            ConfigMessage::ParamGet(ParamGet {
                                block: 0,
                                param: P_GAIN,
                            }),
                        ),
                    };
                    for f in rig.frames_for(to, &msg, transfer) {
                        rig.node.receive(&f, rig.now);
                    }
                }
            }
        }
        rig.node.poll(rig.now, &mut rig.bus, &mut rig.app);
        polls += 1;
        sent.extend(rig.bus.sent.drain(..).map(|f| (rig.now, f)));
    }
    (sent, polls)
}

#[test]
fn polling_at_the_deadlines_sends_what_polling_often_sends() {
    const STEP: u32 = 50;
    let (often, often_polls) = run(|_, now| now.wrapping_add(STEP));
    let (lazy, lazy_polls) = run(|rig, now| {
        rig.node
            .poll_at(now)
            .expect("a running node always has a deadline")
    });
    // Periodic feedback, the on-commit event, heartbeats, the watchdog's SUSPENDED and
    // the ANNOUNCEs after it, two PARAM_VALUEs.
    assert!(often.len() > 50, "{} frames", often.len());
    assert_eq!(often.len(), lazy.len());
    for (i, ((ta, fa), (tb, fb))) in often.iter().zip(&lazy).enumerate() {
        assert_eq!(fa, fb, "frame {i}");
        let late = ta.wrapping_sub(*tb);
        assert!(late < STEP, "frame {i}: {ta} vs {tb}");
    }
    assert!(
        lazy_polls * 20 < often_polls,
        "{lazy_polls} polls at the deadlines, {often_polls} every {STEP} µs"
    );
}

#[test]
fn deadlines_through_the_lifecycle() {
    // Unconfigured: nothing is scheduled.
    let idle = TestNode::unconfigured(&DESC, Buffers::new());
    assert_eq!(idle.poll_at(1_000), None);

    // Before the first poll the clock has not started: poll now. Then the listen window.
    let mut rig = Rig::new(false);
    assert_eq!(rig.node.poll_at(rig.now), Some(rig.now));
    let first = rig.now;
    rig.poll();
    let end = first.wrapping_add(listen_end());
    assert_eq!(rig.node.poll_at(rig.now), Some(end));
    // A deadline already passed is due now.
    assert_eq!(rig.node.poll_at(end + 5), Some(end + 5));
    rig.now = end;
    rig.poll();
    // Announcing: the next ANNOUNCE after the shortest back-off.
    let next = rig.node.poll_at(rig.now).unwrap();
    assert_eq!(
        next,
        end.wrapping_add(fcan_core::timing::ANNOUNCE_BACKOFF_MIN_US)
    );

    // A publish while running makes the on-commit frame due at once.
    let mut rig = running_rig();
    let soon = rig.node.poll_at(rig.now).unwrap();
    assert!(soon != rig.now);
    rig.node.publish(0, T_EVENT, &[9, 9, 9, 9]).unwrap();
    assert_eq!(rig.node.poll_at(rig.now), Some(rig.now));
    rig.poll();
    assert_ne!(rig.node.poll_at(rig.now), Some(rig.now));
}
