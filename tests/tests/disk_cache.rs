//! The disk blob cache behind a real `Master`: its I/O runs on the cache's own thread
//! (`fcan_master::cache::Offloaded`) and the engine is woken when a lookup is answered; a
//! second master with the same directory starts warm (issue 10, item 4).
//!
//! Real time, not tokio's paused clock: the cache thread does real I/O, which a paused
//! clock would not wait for.

use std::time::Duration;

use fcan_core::frame::Mtu;
use fcan_e2e::*;
use fcan_master::cache::DiskStore;
use fcan_master::{Master, MasterOptions};

async fn start(w: &World, dir: &std::path::Path) -> Master {
    Master::start(
        w.endpoint(),
        MasterOptions {
            store: Box::new(DiskStore::new(dir)),
            listen_for_other_master: Duration::from_millis(50),
            ..Default::default()
        },
    )
    .await
    .expect("master starts")
}

#[tokio::test]
async fn a_disk_cache_off_the_task_serves_a_warm_start() {
    let dir = std::env::temp_dir().join(format!("fcan-e2e-disk-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut w = World::new(Mtu::Fd);
    w.add_motor(MD1, 8);
    w.add_io(IO3);

    let master = start(&w, &dir).await;
    wait_running(&master, &[MD1, IO3], Duration::from_secs(10)).await;
    for id in [MD1, IO3] {
        let n = node_info(&master, id).await.unwrap();
        assert_eq!(n.schema_source, Some(fcan_master::SchemaSource::Downloaded));
    }
    // The cache thread writes both blobs.
    let blobs = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".bin"))
                    .count()
            })
            .unwrap_or(0)
    };
    for _ in 0..500 {
        if blobs() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(blobs(), 2);
    drop(master);

    let master = start(&w, &dir).await;
    wait_running(&master, &[MD1, IO3], Duration::from_secs(10)).await;
    for id in [MD1, IO3] {
        let n = node_info(&master, id).await.unwrap();
        assert_eq!(
            n.schema_source,
            Some(fcan_master::SchemaSource::Cache),
            "node {id}"
        );
    }
    assert_eq!(master.status().await.unwrap().stats.schema_bytes_read, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
