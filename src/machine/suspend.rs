//! Suspend and resume (SPEC §13, §3 steps 4-5).

use crate::conditions::FALSE;
use crate::constants::conditions as ct;
use crate::effect::EventType;
use crate::outcome::Outcome;
use crate::reason::Reason;

use super::{After, Attempt, DoneInfo};

impl Attempt {
    /// True when the persisted `Ready` says the release was suspended.
    pub(super) fn was_suspended(&self) -> bool {
        self.ctx
            .persisted
            .conditions
            .iter()
            .any(|p| p.type_ == ct::READY && p.reason == Reason::Suspended)
    }

    /// Step 5: a release coming out of suspension says so, then reconciles as usual.
    pub(super) fn announce_resume(&mut self) {
        if self.was_suspended() {
            self.event(EventType::Normal, Reason::Resumed, "Reconciliation resumed");
        }
    }

    /// SPEC §13: Ready=False/Suspended, Reconciling and Stalled removed, event on the
    /// transition only, everything else kept, no requeue.
    pub(super) fn suspend_exit(&mut self) {
        let msg = "Reconciliation is suspended";
        let was = self.was_suspended();
        let c = &mut self.ctx.conds;
        c.set(ct::READY, FALSE, Reason::Suspended, msg);
        c.remove(ct::RECONCILING);
        c.remove(ct::STALLED);
        if !was {
            self.event(EventType::Normal, Reason::Suspended, msg);
        }
        let s = self.observed_status();
        let metrics = vec![self.reconcile_metric(Outcome::NoOp)];
        self.commit(
            s,
            After::Done(DoneInfo {
                outcome: Outcome::NoOp,
                reason: Reason::Suspended,
                requeue: None,
                metrics,
            }),
        );
    }
}
