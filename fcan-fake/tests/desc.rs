//! The strong test: the runtime's tables a fake node builds at run time from a blob are
//! the tables `fcan-codegen` generated into the example firmwares for the same schema,
//! number for number (`NodeDesc: PartialEq` compares every table, the blob and the
//! hash). A layout computed twice, or differently, fails here.

use fcan_fake::{node_desc, FakeSchema};

#[test]
fn motor_driver_tables_equal_the_generated_ones() {
    let generated = &fcan_example_motor_driver::gen::DESC;
    let built = node_desc(generated.blob).expect("the example blob runs");
    assert_eq!(&built, generated);
}

#[test]
fn io_board_tables_equal_the_generated_ones() {
    let generated = &fcan_example_io_board::gen::DESC;
    let built = node_desc(generated.blob).expect("the example blob runs");
    assert_eq!(&built, generated);
}

/// The buffers are sized as the generated `Buffers`: the service slot buffer in
/// particular, which the runtime only checks from below.
#[test]
fn service_buffer_is_the_generated_size() {
    use fcan_runtime_nostd::codegen::Storage;
    for (desc, generated_svc_buf) in [
        (
            &fcan_example_motor_driver::gen::DESC,
            generated_svc_buf::<fcan_example_motor_driver::gen::Buffers>(),
        ),
        (
            &fcan_example_io_board::gen::DESC,
            generated_svc_buf::<fcan_example_io_board::gen::Buffers>(),
        ),
    ] {
        let s = FakeSchema::from_blob(desc.blob).unwrap();
        let mut storage = fcan_fake::VecStorage::new(s.desc, &s.arena);
        assert_eq!(storage.parts().svc_buf_len, generated_svc_buf);
    }
}

fn generated_svc_buf<B: fcan_runtime_nostd::codegen::Storage + Default>() -> usize {
    B::default().parts().svc_buf_len
}

#[test]
fn a_blob_that_does_not_decode_is_refused() {
    let err = node_desc(&[0xff, 0xff, 0xff]).unwrap_err();
    assert!(err.to_string().contains("schema blob"), "{err}");
}

/// `Node::configure` trusts its descriptor; the generated ones pass `NodeDesc::check`.
#[test]
fn the_generated_tables_are_consistent() {
    for desc in [
        &fcan_example_motor_driver::gen::DESC,
        &fcan_example_io_board::gen::DESC,
    ] {
        assert_eq!(desc.check(), Ok(()));
    }
}
