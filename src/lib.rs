//! opm-core: the pure reconcile core of opm-operator (skeleton; see SPEC.md).
