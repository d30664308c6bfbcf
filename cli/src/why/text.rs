//! `kubectl opm why`'s text output.

use super::Why;

/// The explanation in words.
pub fn text(w: &Why) -> String {
    let mut out = format!("{} {}\n", w.release, w.summary);
    if let Some(c) = &w.cluster {
        out.push_str(&format!("Applies to cluster {c}\n"));
    }
    if let Some(l) = &w.left_behind {
        out.push_str(&format!("Left behind: {l}\n"));
    }
    if !w.conditions.is_empty() {
        out.push_str("\nConditions:\n");
        for c in &w.conditions {
            out.push_str(&format!("  {} is {}", c.type_, c.status));
            if !c.reason.is_empty() {
                out.push_str(&format!(" ({})", c.reason));
            }
            if let Some(since) = &c.since {
                out.push_str(&format!(" since {since}"));
            }
            if !c.message.is_empty() {
                out.push_str(&format!(": {}", c.message));
            }
            out.push('\n');
        }
    }
    if !w.failures.is_empty() {
        out.push_str("\nLast failures (newest first):\n");
        for f in &w.failures {
            out.push_str(&format!(
                "  #{} at {} during {}: {}\n",
                f.sequence,
                f.at.as_deref().unwrap_or("an unknown time"),
                f.phase,
                f.message
            ));
        }
    }
    out.push_str("\nNext attempt: ");
    match &w.next_retry_at {
        Some(t) => out.push_str(&format!("{t}\n")),
        None if w.state == "Suspended" => out.push_str("none while suspended\n"),
        None => match &w.next_check_at {
            Some(t) => out.push_str(&format!("the periodic check at {t}\n")),
            None => out.push_str("at the next interval (no retry scheduled)\n"),
        },
    }
    if !w.triggers.is_empty() {
        out.push_str("Would start earlier on:\n");
        for t in &w.triggers {
            out.push_str(&format!("  - {t}\n"));
        }
    }
    out
}
