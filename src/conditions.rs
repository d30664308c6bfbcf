//! Condition mechanics (SPEC §10): a working set edited during the attempt, finalised against
//! the persisted conditions when the status is committed.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::Condition;
use crate::constants::{CONDITION_MESSAGE_MAX, conditions as types};
use crate::reason::Reason;

/// `True`, `False`, `Unknown`.
pub(crate) const TRUE: &str = "True";
/// A condition status: the condition does not hold.
pub const FALSE: &str = "False";
/// A condition status: not decided yet (an attempt or a health wait is under way).
pub(crate) const UNKNOWN: &str = "Unknown";

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Whether `c` is removed from a message: a control character other than newline and tab
/// (ESC starts a terminal escape sequence, CR rewrites the line, C1 `U+009B` is a CSI on
/// some terminals), or a bidirectional override that makes a terminal show text in
/// another order than it is stored.
pub fn is_unsafe_in_message(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` without the characters of [`is_unsafe_in_message`] (SPEC §24): every message that
/// may quote what a tenant wrote (a name, a CUE, CEL or API error) goes through this
/// before it reaches a condition, an event, the history or a terminal.
pub fn without_control(s: &str) -> String {
    if !s.chars().any(is_unsafe_in_message) {
        return s.to_string();
    }
    s.chars().filter(|c| !is_unsafe_in_message(*c)).collect()
}

/// Seconds precision, as the API server stores times; keeps comparisons with persisted
/// values exact.
pub(crate) fn k8s_time(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// The conditions as the attempt wants them; transition times are decided at commit.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Conditions {
    list: Vec<Condition>,
}

impl Conditions {
    /// Starts the working set from the stored conditions, so unchanged ones keep their times.
    pub fn from_persisted(persisted: &[Condition]) -> Self {
        Self {
            list: persisted.to_vec(),
        }
    }

    /// The working condition of `type_`, if set.
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.list.iter().find(|c| c.type_ == type_)
    }

    /// True when `type_` is present with `status`.
    pub fn is(&self, type_: &str, status: &str) -> bool {
        self.get(type_).is_some_and(|c| c.status == status)
    }

    /// Sets `type_` (message without control characters, truncated to the API limit); its
    /// transition time is decided at `finalize`.
    pub fn set(&mut self, type_: &str, status: &str, reason: Reason, message: &str) {
        let message = truncate(&without_control(message), CONDITION_MESSAGE_MAX);
        match self.list.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                c.status = status.to_string();
                c.reason = reason.as_str().to_string();
                c.message = message;
            }
            None => self.list.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.as_str().to_string(),
                message,
                last_transition_time: None,
                observed_generation: 0,
            }),
        }
    }

    /// Drops `type_`, as a stall drops `Reconciling` and a success `Stalled`.
    pub fn remove(&mut self, type_: &str) {
        self.list.retain(|c| c.type_ != type_);
    }

    /// The conditions to persist: `lastTransitionTime` kept from the persisted condition unless
    /// status, reason or message changed, `observedGeneration` = `generation`, sorted
    /// Stalled, Reconciling, Ready, then by type.
    pub fn finalize(
        &self,
        persisted: &[Condition],
        now: Timestamp,
        generation: i64,
    ) -> Vec<Condition> {
        let mut out: Vec<Condition> = self
            .list
            .iter()
            .map(|c| {
                let old = persisted.iter().find(|p| p.type_ == c.type_);
                let ltt = match old {
                    Some(p)
                        if p.status == c.status
                            && p.reason == c.reason
                            && p.message == c.message
                            && p.last_transition_time.is_some() =>
                    {
                        p.last_transition_time.clone()
                    }
                    _ => Some(k8s_time(now)),
                };
                Condition {
                    last_transition_time: ltt,
                    observed_generation: generation,
                    ..c.clone()
                }
            })
            .collect();
        out.sort_by(|a, b| order_key(&a.type_).cmp(&order_key(&b.type_)));
        out
    }
}

fn order_key(type_: &str) -> (u8, &str) {
    let rank = match type_ {
        types::STALLED => 0,
        types::RECONCILING => 1,
        types::READY => 2,
        _ => 3,
    };
    (rank, type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_removed_newlines_and_tabs_kept() {
        assert_eq!(
            without_control("a\u{1b}[31mred\u{7}\r\nb\tc\u{9b}d\u{202e}e\u{0}"),
            "a[31mred\nb\tcde"
        );
        assert_eq!(without_control("plain: ok"), "plain: ok");
        let mut c = Conditions::default();
        c.set(
            "Ready",
            FALSE,
            Reason::RenderFailed,
            "x\u{1b}]0;title\u{7}y",
        );
        assert_eq!(c.get("Ready").unwrap().message, "x]0;titley");
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn ltt_changes_only_on_real_transitions() {
        let t0 = ts("2026-01-01T00:00:00Z");
        let t1 = ts("2026-01-01T00:10:00.750Z");
        let mut c = Conditions::default();
        c.set("Ready", FALSE, Reason::ApplyFailed, "boom");
        let persisted = c.finalize(&[], t0, 1);
        assert_eq!(persisted[0].last_transition_time, Some(k8s_time(t0)));

        let same = Conditions::from_persisted(&persisted).finalize(&persisted, t1, 2);
        assert_eq!(same[0].last_transition_time, Some(k8s_time(t0)));
        assert_eq!(same[0].observed_generation, 2);

        let mut changed = Conditions::from_persisted(&persisted);
        changed.set("Ready", FALSE, Reason::ApplyFailed, "boom again");
        let changed = changed.finalize(&persisted, t1, 2);
        assert_eq!(changed[0].last_transition_time, Some(k8s_time(t1)));
        assert_eq!(
            serde_json::to_value(&changed[0].last_transition_time).unwrap(),
            "2026-01-01T00:10:00Z"
        );
    }

    #[test]
    fn ordering_is_stalled_reconciling_ready_then_type() {
        let mut c = Conditions::default();
        for t in [
            "Drifted",
            "Ready",
            "ModuleResolved",
            "Reconciling",
            "Stalled",
        ] {
            c.set(t, TRUE, Reason::Progressing, "m");
        }
        let got: Vec<String> = c
            .finalize(&[], ts("2026-01-01T00:00:00Z"), 1)
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert_eq!(
            got,
            [
                "Stalled",
                "Reconciling",
                "Ready",
                "Drifted",
                "ModuleResolved"
            ]
        );
    }

    #[test]
    fn messages_are_truncated_on_char_boundaries() {
        let long = "é".repeat(CONDITION_MESSAGE_MAX);
        let mut c = Conditions::default();
        c.set("Ready", FALSE, Reason::RenderFailed, &long);
        let m = &c.get("Ready").unwrap().message;
        assert!(m.len() <= CONDITION_MESSAGE_MAX && m.len() >= CONDITION_MESSAGE_MAX - 1);
        assert_eq!(truncate("abc", 2), "ab");
    }
}
