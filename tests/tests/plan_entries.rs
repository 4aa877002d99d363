//! The master's planner never makes a copy entry the node would refuse: every entry of
//! every plan, for the example schemas and the ancestor's (`shared/compat/fibril`), on
//! Classical CAN and CAN FD, passes `fcan_core::dataframe::entry_fits`, the rule the
//! node's FRAME_DEFINE check applies.

use fcan_core::arena::needs_staging;
use fcan_core::dataframe::{entry_fits, EntryTopic};
use fcan_core::frame::Mtu;
use fcan_core::numbering::Numbering;
use fcan_e2e::{fibril_dir, fibril_nodes};
use fcan_master::planner::{plan_node, IdAllocator};

fn check(name: &str, files: &[std::path::PathBuf]) -> usize {
    let out = fcan_codegen::compile_files(files).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let schema = fcan_core::blob::decode(&out.blob).expect("the blob decodes");
    let numbering = Numbering::of(&schema).expect("numbered");
    let counts: Vec<u8> = schema
        .instances
        .iter()
        .map(|a| a.max_count.min(255) as u8)
        .collect();
    let mut checked = 0;
    for mtu in [Mtu::Classic, Mtu::Fd] {
        // A plan may not fit a node's limits on one of the buses (the robstride ancestor
        // on Classical CAN): then there is nothing to send, and nothing to check.
        let Ok(plan) = plan_node(&schema, &counts, mtu, &mut IdAllocator::new()) else {
            continue;
        };
        for (i, f) in plan.frames.iter().enumerate() {
            let first = f.entries[0];
            let mut occupied = 0u64;
            for e in &f.entries {
                let block = &numbering.blocks[e.block as usize];
                let ty = &schema.types[block.type_index];
                let dir = ty.topics[e.topic as usize].dir;
                let size = numbering.layouts[block.type_index].topics[e.topic as usize].size;
                let topic = EntryTopic {
                    dir,
                    size: size as u16,
                    staged: needs_staging(dir, size),
                };
                assert!(
                    entry_fits(&f.header, e, topic, &first, &mut occupied),
                    "{name} on {mtu:?}: frame {i} entry {e:?} of {:?}",
                    f.header
                );
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn the_example_plans_pass_the_node_rule() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (name, file) in [
        ("motor_driver", "schema/examples/motor_driver.yaml"),
        ("io_board", "schema/examples/io_board.yaml"),
    ] {
        assert!(check(name, &[root.join(file)]) > 10, "{name}");
    }
}

#[test]
fn the_ancestor_plans_pass_the_node_rule() {
    let Some(dir) = fibril_dir() else {
        eprintln!("NOTE: shared/compat/fibril is not beside the workspace: SKIPPED");
        return;
    };
    for (name, files) in fibril_nodes(&dir) {
        assert!(check(name, &files) > 0, "{name}");
    }
}
