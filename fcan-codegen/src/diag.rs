//! Diagnostics: every problem found in a set of schema files, each with `file:line:col`.

use std::fmt;

use crate::yaml::Pos;

/// One problem, located in a source file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Diagnostic {
    /// The file as it was given (path text).
    pub file: String,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub col: u32,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic at a position.
    pub fn new(file: impl Into<String>, pos: Pos, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.into(),
            line: pos.line.max(1),
            col: pos.col.max(1),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    /// `FILE:LINE:COL: error: MESSAGE`, the form compilers and editors understand.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// Every problem found; never empty when returned as an error.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// The problems, one per line in [`Diagnostic`]'s format.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// How many problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
