//! Render turns: what a render waits for before `cue` runs.

/// A render turn (SPEC §24 `--max-concurrent-renders`, fair across namespaces): the
/// operator's is the render gate ([`crate::controller::admission::Admission`]).
pub trait RenderGate: Sync {
    /// Held while `cue` runs; dropping it gives the turn back.
    type Turn: Send;
    /// Waits for a turn of `namespace`.
    fn turn(&self, namespace: &str) -> impl Future<Output = Self::Turn> + Send;
}

/// A gate that never waits (tests, tools that render one release at a time).
pub struct Ungated;

impl RenderGate for Ungated {
    type Turn = ();
    async fn turn(&self, _namespace: &str) {}
}
