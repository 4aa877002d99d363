//! Probe: writes std_msgs/Bool on rt/probe_out every 100 ms and prints what arrives on
//! rt/probe_in.
use fcan_ros2_bridge::dds::{Dds, DdsWriter, Endpoint, Qos};
use fcan_ros2_bridge::rustdds_backend::RustDds;
use futures_util::StreamExt;

#[tokio::main]
async fn main() {
    let dds = RustDds::new(0).unwrap();
    let ty = "std_msgs::msg::dds_::Bool_".to_string();
    let w = dds
        .writer(&Endpoint {
            topic: "rt/probe_out".into(),
            type_name: ty.clone(),
            qos: Qos::DEFAULT,
        })
        .unwrap();
    let mut r = dds
        .reader(&Endpoint {
            topic: "rt/probe_in".into(),
            type_name: ty,
            qos: Qos::DEFAULT,
        })
        .unwrap();
    tokio::spawn(async move {
        while let Some(s) = r.next().await {
            println!("in: {s:02x?}");
        }
    });
    for i in 0..100u32 {
        w.write(&[0, 1, 0, 0, (i % 2) as u8]).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
