//! The async interpreter of opm-operator (DESIGN.md §2).
