//! The `build.rs` entry point, in the style of `prost-build`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{load_files, Diagnostics, Output};

/// Compiles schema files from a build script into `OUT_DIR`.
///
/// Writes `fcan_gen.rs`, `schema.bin` and `schema.sha256`, and prints
/// `cargo:rerun-if-changed=FILE` for every schema file, so cargo reruns the build script
/// when one of them changes.
///
/// In `build.rs`:
///
/// ```no_run
/// fn main() -> Result<(), fcan_codegen::BuildError> {
///     fcan_codegen::Builder::new()
///         .schemas(["schema/node.yaml", "schema/motor.type.yaml"])
///         .compile()?;
///     Ok(())
/// }
/// ```
///
/// and in the firmware:
///
/// ```text
/// mod fcan {
///     include!(concat!(env!("OUT_DIR"), "/fcan_gen.rs"));
/// }
/// ```
///
/// A runnable example, writing into a chosen directory instead of `OUT_DIR`:
///
/// ```
/// let dir = std::env::temp_dir().join(format!("fcan-builder-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let schema = dir.join("node.yaml");
/// std::fs::write(&schema, "\
/// node: blinker{i}
/// protocol: 2
/// types:
///   Led:
///     params:
///       brightness: { type: u8, default: 128 }
///     topics:
///       on:
///         dir: m2s
///         fields: { value: bool }
/// instances:
///   - { type: Led, max_count: 4, ns: \"led{i}\" }
/// ").unwrap();
///
/// let out = fcan_codegen::Builder::new()
///     .schema(&schema)
///     .out_dir(dir.join("gen"))
///     .emit_rerun_if_changed(false)
///     .compile()
///     .unwrap();
/// assert!(dir.join("gen/fcan_gen.rs").exists());
/// assert_eq!(std::fs::read(dir.join("gen/schema.bin")).unwrap(), out.blob);
/// assert!(out.rust.contains("pub mod led"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct Builder {
    schemas: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    quiet: bool,
    opts: crate::Options,
}

impl Builder {
    /// A builder with no schemas, writing into `OUT_DIR`.
    pub fn new() -> Self {
        Builder::default()
    }

    /// Adds one schema file.
    pub fn schema(mut self, path: impl AsRef<Path>) -> Self {
        self.schemas.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds schema files. Their order does not matter: files merge by file name.
    pub fn schemas<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        self.schemas
            .extend(paths.into_iter().map(|p| p.as_ref().to_path_buf()));
        self
    }

    /// Writes into `dir` instead of `OUT_DIR`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` lines (default: yes).
    pub fn emit_rerun_if_changed(mut self, yes: bool) -> Self {
        self.quiet = !yes;
        self
    }

    /// Generates `App::update` for firmware updates over the bus (default: no). The
    /// firmware then enables `fcan-runtime-nostd`'s `update` feature and returns its
    /// staging area from `App::update` ([`crate::Options::firmware_updates`]).
    pub fn firmware_updates(mut self, yes: bool) -> Self {
        self.opts.firmware_updates = yes;
        self
    }

    /// Validates the schemas and writes the outputs. Returns what was written.
    pub fn compile(&self) -> Result<Output, BuildError> {
        if self.schemas.is_empty() {
            return Err(BuildError::NoSchemas);
        }
        if !self.quiet {
            // Before loading, so that cargo reruns once a broken schema is fixed.
            for s in &self.schemas {
                let path = s.display().to_string();
                // A line break would end the directive and start another one.
                if path.contains(['\n', '\r']) {
                    println!("cargo:warning=a schema path holds a line break; cargo cannot watch it for changes");
                } else {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
        let dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(BuildError::NoOutDir)?,
        };
        let out = load_files(&self.schemas)
            .and_then(|l| crate::generate_with(&l, &self.opts))
            .map_err(BuildError::Schema)?;
        out.write_to(&dir).map_err(|e| BuildError::Io(dir, e))?;
        Ok(out)
    }
}

/// Why [`Builder::compile`] failed.
#[non_exhaustive]
pub enum BuildError {
    /// No schema files were given.
    NoSchemas,
    /// `OUT_DIR` is not set (not running under cargo) and no `out_dir` was given.
    NoOutDir,
    /// The schemas have errors; each is `FILE:LINE:COL: error: MESSAGE`.
    Schema(Diagnostics),
    /// Writing the outputs failed.
    Io(PathBuf, std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoSchemas => f.write_str("fcan-codegen: no schema files given"),
            BuildError::NoOutDir => {
                f.write_str("fcan-codegen: OUT_DIR is not set; call Builder::out_dir")
            }
            BuildError::Schema(d) => write!(f, "fcan-codegen: the schema has errors:\n{d}"),
            BuildError::Io(dir, e) => {
                write!(f, "fcan-codegen: cannot write into {}: {e}", dir.display())
            }
        }
    }
}

/// Shows the same text as `Display`, so `build.rs` returning `Result` prints every
/// schema error on its own line.
impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BuildError {}
