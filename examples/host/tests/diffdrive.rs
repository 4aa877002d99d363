//! The diff-drive example (issue 16 item 3) as a user runs it: the real binary, its
//! printed story checked step by step — activation, driving (the wheels reach their
//! commanded velocity), the pulled node's fault within the feedback timeout, the
//! bounded safe stop, re-provisioning, the fault cleared, driving again, deactivation.
//! The same with the right wheel a RobStride driven by fcan's device driver (issue 24).
//! And a configuration with a typo fails before the loop starts, naming the field.

use std::process::Command;

fn diffdrive(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_diffdrive"))
        .args(args)
        .output()
        .expect("diffdrive runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The number after `key` in `line` (e.g. `L +0.95` → 0.95).
fn number_after(line: &str, key: &str) -> f64 {
    let rest = &line[line
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len()..];
    rest.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches("ms")
        .parse()
        .unwrap()
}

#[test]
fn drives_faults_on_a_pulled_node_and_recovers() {
    // The right wheel an fcan board on CAN FD and Classical CAN, then a RobStride
    // (driven by fcan's device driver beside the board on the left).
    let runs: [(&[&str], &str); 3] = [
        (&[], "motor_driver2"),
        (&["--classic"], "motor_driver2"),
        (&["--right", "robstride", "--classic"], "robstride2"),
    ];
    for (bus, right) in runs {
        let mut args = vec!["--drive", "3"];
        args.extend_from_slice(bus);
        let pulling = format!("-- pulling {right} off the bus --");
        let (ok, out, err) = diffdrive(&args);
        assert!(ok, "diffdrive {args:?} failed:\n{out}\n{err}");
        let at = |needle: &str| {
            out.find(needle)
                .unwrap_or_else(|| panic!("`{needle}` missing from:\n{out}"))
        };
        // The story, in order.
        let steps: [&str; 9] = [
            "active in",
            &pulling,
            "fault detected",
            "FAULT: feedback timeout (host side): state right_wheel/",
            "safe stop done: 10 safe batches sent",
            "re-provisioned",
            "fault cleared",
            "active again",
            "deactivated",
        ];
        let positions: Vec<usize> = steps.iter().map(|s| at(s)).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "out of order:\n{out}"
        );
        // Faulted within the 50 ms feedback timeout plus a feedback period and slack.
        let line = out
            .lines()
            .find(|l| l.starts_with("fault detected"))
            .unwrap();
        let after: f64 = number_after(line, "detected");
        assert!(after <= 80.0, "fault {after} ms after the pull:\n{out}");
        // While driving straight (0.3 m/s → 0.95 rev/s), both wheels follow.
        let straight = out
            .lines()
            .rfind(|l| l.contains("(cmd +0.95 +0.95)"))
            .unwrap_or_else(|| panic!("no straight driving:\n{out}"));
        for wheel in ["L ", "R "] {
            let v = number_after(straight, wheel);
            assert!((v - 0.95).abs() < 0.1, "{wheel}wheel {v}: {straight}");
        }
    }
}

#[test]
fn a_bad_configuration_names_the_field() {
    let dir = std::env::temp_dir().join(format!("fcan-diffdrive-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/diffdrive.yaml"
    ))
    .unwrap();
    let bad = good.replacen("feedback.velocity", "feedback.velocty", 1);
    assert_ne!(bad, good);
    let path = dir.join("bad.yaml");
    std::fs::write(&path, bad).unwrap();
    let (ok, out, err) = diffdrive(&[
        "--config",
        path.to_str().unwrap(),
        "--no-pull",
        "--drive",
        "1",
    ]);
    assert!(!ok, "accepted:\n{out}");
    assert!(
        err.contains("state `left_wheel/velocity`") && err.contains("no field `velocty`"),
        "{err}"
    );
    assert!(!out.contains("active in"), "the loop never started:\n{out}");
    std::fs::remove_dir_all(&dir).ok();
}
