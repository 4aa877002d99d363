//! Compiles the schemas the drivers ship into blobs (`OUT_DIR/<name>.bin`) with the same
//! library `fcan-codegen` is: a schema error fails this build with `file:line:col`.
fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in ["robstride", "mit"] {
        let path = format!("schemas/{name}.yaml");
        println!("cargo:rerun-if-changed={path}");
        let compiled = match fcan_codegen::compile_files(&[&path]) {
            Ok(c) => c,
            Err(d) => panic!("{path}: the schema does not compile:\n{d}"),
        };
        std::fs::write(out.join(format!("{name}.bin")), &compiled.blob).expect("writes the blob");
    }
}
