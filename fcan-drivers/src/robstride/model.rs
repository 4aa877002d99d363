//! RobStride private protocol frames (helper-owned; see the module docs).
