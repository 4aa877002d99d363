//! Mirror rules checked against a schema when a fake node is built: each mistake is an
//! error naming the rule and the field; good rules resolve to one copy per instance.

use std::sync::Arc;

use fcan_core::id::NodeId;
use fcan_fake::{FakeConfig, FakeError, FakeNode, FakeSchema, Mirror};

fn motor_driver() -> Arc<FakeSchema> {
    FakeSchema::from_blob(fcan_example_motor_driver::gen::DESC.blob).unwrap()
}

fn io_board() -> Arc<FakeSchema> {
    FakeSchema::from_blob(fcan_example_io_board::gen::DESC.blob).unwrap()
}

fn resolve(schema: &FakeSchema, rule: &str) -> Result<usize, String> {
    let mut m = Mirror::new();
    m.add(rule, "--mirror").map_err(|e| e.to_string())?;
    m.resolve(schema)
        .map(|r| r.len())
        .map_err(|e| e.to_string())
}

#[test]
fn a_star_rule_maps_every_instance_and_a_plain_one_a_single_instance() {
    let s = motor_driver();
    let motors = s.schema.instances[0].max_count as usize;
    assert_eq!(
        resolve(&s, "motor*/target.value=motor*/feedback.position"),
        Ok(motors)
    );
    assert_eq!(
        resolve(&s, "motor2/target.value -> motor5/feedback.position"),
        Ok(1)
    );
    // Whole topics: every field the two share by name (position, velocity).
    assert_eq!(
        resolve(&s, "motor*/trajectory=motor*/feedback"),
        Ok(2 * motors)
    );
}

#[test]
fn mistakes_name_the_field() {
    let s = motor_driver();
    let cases = [
        (
            "motor*/targt.value=motor*/feedback.position",
            "no topic `motor*/targt`",
        ),
        (
            "motor*/target.valu=motor*/feedback.position",
            "has no field `valu`",
        ),
        (
            "motor*/feedback.position=motor*/target.value",
            "`motor*/feedback` is feedback (s2m)",
        ),
        (
            "motor*/target.value=motor*/trajectory.position",
            "`motor*/trajectory` is a command (m2s)",
        ),
        (
            "motor*/target.value=motor0/feedback.position",
            "must be on both sides",
        ),
        (
            "motor*/target.value[0]=motor*/feedback.position",
            "not a fixed array",
        ),
        (
            "motor*/target=motor*/feedback.position",
            "name a field on both sides",
        ),
        ("motor*/target=motor*/feedback", "share no field name"),
        ("motor*/target.value", "expected COMMAND=FEEDBACK"),
    ];
    for (rule, want) in cases {
        let e = resolve(&s, rule).expect_err(rule);
        assert!(e.contains(want), "{rule}: {e}");
        assert!(e.contains(rule.trim()), "the error names the rule: {e}");
    }
    // Shapes that cannot convert: 8 × i16 onto 16 × i16, and an array onto a scalar.
    let io = io_board();
    for (rule, want) in [
        ("analog/thresholds.low=analog/samples.raw", "8 × i16"),
        ("analog/thresholds.low=analog/samples.sequence", "one u16"),
        (
            "analog/thresholds.low[8]=analog/samples.sequence",
            "[8] is out of range",
        ),
    ] {
        let e = resolve(&io, rule).expect_err(rule);
        assert!(e.contains(want), "{rule}: {e}");
    }
    // One element converts.
    assert_eq!(
        resolve(&io, "analog/thresholds.low[3]=analog/samples.raw[15]"),
        Ok(1)
    );
    assert_eq!(
        resolve(&io, "analog/thresholds.enable=analog/samples.sequence"),
        Ok(1)
    );
}

#[test]
fn a_mirror_file_names_the_line() {
    let mut m = Mirror::new();
    let e = m
        .add_file(
            "# commands to feedback\n\nmotor*/target.value=motor*/feedback.position\nmotor*/nothing\n",
            "mirror.txt",
        )
        .unwrap_err();
    assert_eq!(e.origin, "mirror.txt:4");
}

#[test]
fn a_fake_node_refuses_a_bad_mirror_and_bad_counts() {
    let s = motor_driver();
    let mut mirror = Mirror::new();
    mirror
        .add("motor*/target.value=motor*/feedback.positon", "--mirror")
        .unwrap();
    let config = |mirror: Mirror, counts: Option<Vec<u8>>| FakeConfig {
        node_id: NodeId::new(4).unwrap(),
        boot_id: 1,
        counts,
        fd_capable: true,
        mirror,
    };
    let e = FakeNode::new(s.clone(), config(mirror, None)).unwrap_err();
    assert!(matches!(e, FakeError::Mirror(_)), "{e}");
    assert!(e.to_string().contains("positon"), "{e}");
    let too_many = s.schema.instances[0].max_count as u8 + 1;
    let e = FakeNode::new(s.clone(), config(Mirror::new(), Some(vec![too_many]))).unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
    assert!(s.counts(&[("Motor".into(), too_many)]).is_err());
    assert!(s
        .counts(&[("wheel*".into(), 1)])
        .unwrap_err()
        .to_string()
        .contains("motor*"));
    let n = FakeNode::new(s.clone(), config(Mirror::new(), Some(vec![2]))).unwrap();
    assert_eq!(n.name(), "motor_driver4");
    assert!(n.node().is_wired(1) && !n.node().is_wired(2));
}
