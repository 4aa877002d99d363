//! Generates the node's typed code, blob and hash from the example schema.
fn main() -> Result<(), fcan_codegen::BuildError> {
    fcan_codegen::Builder::new()
        .schema("../../schema/examples/io_board.yaml")
        .compile()?;
    Ok(())
}
