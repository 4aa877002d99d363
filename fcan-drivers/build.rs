//! Compiles the schemas the drivers ship into blobs (`OUT_DIR/<name>.bin`) with the same
//! library `fcan-codegen` is: a schema error fails this build with `file:line:col`.
//!
//! Every `schemas/*.yaml` is compiled, by convention rather than from a list: a driver
//! registered in `src/registry.rs` needs no edit here. (This script runs before the
//! crate compiles, so it cannot read the registry; a list here would be a second place
//! to register a driver.) The two stay in step both ways: a driver whose schema file is
//! missing does not compile (`include_bytes!` of its blob), and a schema with no
//! registered driver fails `registry::tests::every_schema_file_is_a_registered_drivers`.
fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // A schema added or removed, as well as one changed.
    println!("cargo:rerun-if-changed=schemas");
    let mut names: Vec<String> = std::fs::read_dir("schemas")
        .expect("fcan-drivers/schemas/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .collect();
    names.sort();
    for name in names {
        let path = format!("schemas/{name}.yaml");
        println!("cargo:rerun-if-changed={path}");
        let compiled = match fcan_codegen::compile_files(&[&path]) {
            Ok(c) => c,
            Err(d) => panic!("{path}: the schema does not compile:\n{d}"),
        };
        std::fs::write(out.join(format!("{name}.bin")), &compiled.blob).expect("writes the blob");
    }
}
