//! The per-object write plan of SPEC §28: for one object of an Apply, given its policy,
//! whether it is live and the release's `force` setting, whether it is written at all and
//! whether the write takes fields other managers own. The one home of this rule: the
//! operator's apply, the simulated world and `kubectl opm diff` all ask it.
//!
//! What the write holds (ignore rules, `Merge`'s fields of others left out) is
//! [`super::prepare`]; whether an immutability refusal recreates the object is
//! [`super::recreate::recreate`].

use crate::object::{ObjectPolicy, SsaPolicy};

/// What to do with one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritePlan {
    /// No write: `ssa: Ignore`, or `ssa: IfNotPresent` and the object exists. Reported as
    /// `Unchanged`.
    Skip,
    /// Server-side apply without force: a field another manager owns is a conflict (or,
    /// with `ssa: Merge`, left out of the write by [`super::prepare`]).
    Apply,
    /// Server-side apply with force: fields other managers own are taken.
    Force,
}

impl WritePlan {
    /// Whether the object is written.
    pub fn writes(self) -> bool {
        self != WritePlan::Skip
    }

    /// Whether the write is forced (SSA `force=true`).
    pub fn forced(self) -> bool {
        self == WritePlan::Force
    }
}

/// The plan for an object with `policy`, `live` when it exists, in an Apply whose `force`
/// is `force` (the release's `rollout.forceConflicts`, or a drift correction):
/// - `Ignore` never writes; `IfNotPresent` writes only to create;
/// - `Merge` never forces (it never takes fields other managers own);
/// - otherwise the apply is forced exactly when `force` is set.
///
/// For `Override` and `Merge` the answer does not depend on `live`, so a caller may decide
/// before reading the object.
pub fn write_plan(policy: &ObjectPolicy, live: bool, force: bool) -> WritePlan {
    match policy.ssa {
        SsaPolicy::Ignore => WritePlan::Skip,
        SsaPolicy::IfNotPresent if live => WritePlan::Skip,
        SsaPolicy::Merge => WritePlan::Apply,
        SsaPolicy::Override | SsaPolicy::IfNotPresent if force => WritePlan::Force,
        SsaPolicy::Override | SsaPolicy::IfNotPresent => WritePlan::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(ssa: SsaPolicy) -> ObjectPolicy {
        ObjectPolicy {
            ssa,
            ..ObjectPolicy::default()
        }
    }

    #[test]
    fn every_policy_live_or_not_forced_or_not() {
        use SsaPolicy::*;
        use WritePlan::*;
        let table = [
            // (ssa, live, force) -> plan
            (Override, false, false, Apply),
            (Override, true, false, Apply),
            (Override, false, true, Force),
            (Override, true, true, Force),
            (Merge, false, false, Apply),
            (Merge, true, false, Apply),
            (Merge, false, true, Apply),
            (Merge, true, true, Apply),
            (IfNotPresent, false, false, Apply),
            (IfNotPresent, false, true, Force),
            (IfNotPresent, true, false, Skip),
            (IfNotPresent, true, true, Skip),
            (Ignore, false, false, Skip),
            (Ignore, true, true, Skip),
        ];
        for (ssa, live, force, want) in table {
            assert_eq!(
                write_plan(&with(ssa), live, force),
                want,
                "{ssa:?} live={live} force={force}"
            );
        }
    }
}
