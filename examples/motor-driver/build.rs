//! Generates the node's typed code, blob and hash from the example schema.
fn main() -> Result<(), fcan_codegen::BuildError> {
    fcan_codegen::Builder::new()
        .schema("../../schema/examples/motor_driver.yaml")
        // `App::update` only with the crate's `update` feature (which turns on the
        // runtime's): without it the firmware links none of the update code.
        .firmware_updates(std::env::var_os("CARGO_FEATURE_UPDATE").is_some())
        .compile()?;
    Ok(())
}
