//! Test support (skeleton).
