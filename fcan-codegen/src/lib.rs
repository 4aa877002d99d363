//! `fcan-codegen`: the fcan schema compiler.
//!
//! YAML schema files (several may be merged) → a validated [`fcan_core::ir::Schema`] →
//! the protobuf schema blob and its SHA-256 → Rust source for `fcan-runtime-nostd`, or
//! C99 source for the C API of `fcan-node-c` ([`c`]).
//!
//! Use it from `build.rs` through [`Builder`], or from the command line
//! (`fcan-codegen check|generate|c|inspect|diff`). The schema language is described in
//! `docs/schema.md`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod builder;
pub mod c;
mod diag;
pub mod diff;
mod frontend;
pub mod inspect;
mod load;
pub mod rust;
pub mod yaml;

pub use builder::{BuildError, Builder};
pub use diag::{Diagnostic, Diagnostics};
pub use load::{load_files, load_sources, Loaded, Locator, Source};

use fcan_core::hash::SchemaDigest;

/// Everything `generate` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The schema blob (`schema.bin`).
    pub blob: Vec<u8>,
    /// Its SHA-256.
    pub digest: SchemaDigest,
    /// The Rust module (`fcan_gen.rs`).
    pub rust: String,
}

impl Output {
    /// The text of `schema.sha256`: lowercase hex and a newline.
    pub fn sha256_text(&self) -> String {
        format!("{}\n", self.digest)
    }

    /// Writes `fcan_gen.rs`, `schema.bin` and `schema.sha256` into `dir` (created if
    /// missing). Returns the paths written.
    pub fn write_to(&self, dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        write_files(
            dir,
            vec![
                (dir.join("fcan_gen.rs"), self.rust.as_bytes().to_vec()),
                (dir.join("schema.bin"), self.blob.clone()),
                (dir.join("schema.sha256"), self.sha256_text().into_bytes()),
            ],
        )
    }
}

/// Writes `files` into `dir` (created if missing), leaving a file whose bytes are
/// already these alone (so a build does not rerun for nothing). Returns the paths.
pub(crate) fn write_files(
    dir: &std::path::Path,
    files: Vec<(std::path::PathBuf, Vec<u8>)>,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (path, bytes) in files {
        if std::fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
            std::fs::write(&path, &bytes)?;
        }
        written.push(path);
    }
    Ok(written)
}

/// Compiles a loaded schema: blob, digest and Rust source. Fails only on problems that
/// are about Rust (two generated names that collide, names Rust cannot use).
pub fn generate(loaded: &Loaded) -> Result<Output, Diagnostics> {
    generate_with(loaded, &Options::default())
}

/// What the generated code offers beyond the schema's own items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// Firmware updates over the bus (`docs/protocol.md` §3.14): the generated `App`
    /// trait gets `fn update(&mut self) -> Option<&mut dyn Update>` (by default `None`,
    /// refusing every offer) and the runtime is handed it. The firmware must enable
    /// `fcan-runtime-nostd`'s `update` feature; without this option it can leave the
    /// feature off and pays nothing.
    pub firmware_updates: bool,
}

/// [`generate`] with options.
pub fn generate_with(loaded: &Loaded, opts: &Options) -> Result<Output, Diagnostics> {
    let blob = fcan_core::blob::encode(&loaded.schema);
    let digest = SchemaDigest::of(&blob);
    let rust = rust::render(loaded, &blob, &digest, opts)?;
    Ok(Output { blob, digest, rust })
}

/// Loads, validates and compiles schema files in one step.
pub fn compile_files<P: AsRef<std::path::Path>>(paths: &[P]) -> Result<Output, Diagnostics> {
    generate(&load_files(paths)?)
}
