//! MIT-mode frames.
