//! Go-style duration strings (`5m`, `1h30m`, `1.5s`), as Kubernetes users write them.
//!
//! Parsed and printed here rather than with a general crate because the format is Go's, not
//! ISO 8601, and the printed form lands in `status.lastAttemptedDuration`.

use std::time::Duration;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why}")]
pub struct DurationError {
    /// The string as written, for the message.
    pub input: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Parses a non-negative Go duration (`300ms`, `10s`, `5m`, `1h30m`, `1.5h`).
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |why| DurationError {
        input: input.to_string(),
        why,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let nanos_per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(err("unknown unit")),
        };
        let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
        if whole.is_empty() && frac.is_empty() {
            return Err(err("expected a number"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| err("number too large"))?
        };
        let mut part = whole
            .checked_mul(nanos_per)
            .ok_or_else(|| err("number too large"))?;
        let mut scale = nanos_per;
        for d in frac.chars() {
            scale /= 10;
            let digit = u128::from(d.to_digit(10).ok_or_else(|| err("bad fraction"))?);
            // `whole * nanos_per` may already sit just below `u128::MAX`: checked, so a
            // hostile string is an error, never an overflow panic.
            part = part
                .checked_add(digit * scale)
                .ok_or_else(|| err("number too large"))?;
        }
        total = total
            .checked_add(part)
            .ok_or_else(|| err("number too large"))?;
        rest = next;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| err("number too large"))?;
    // The remainder of a division by 1e9 always fits in u32.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Prints a duration as Go's `time.Duration.String` does, at millisecond precision
/// (`0s`, `150ms`, `2.5s`, `1m30s`, `1h0m0s`).
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let total_secs = ms / 1000;
    let frac = ms % 1000;
    let secs = total_secs % 60;
    let mins = (total_secs / 60) % 60;
    let hours = total_secs / 3600;
    let mut sec_str = secs.to_string();
    if frac != 0 {
        let f = format!("{frac:03}");
        sec_str = format!("{secs}.{}", f.trim_end_matches('0'));
    }
    if hours > 0 {
        format!("{hours}h{mins}m{sec_str}s")
    } else if mins > 0 {
        format!("{mins}m{sec_str}s")
    } else {
        format!("{sec_str}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert!(parse("").is_err());
        assert!(parse("5").is_err());
        assert!(parse("5x").is_err());
        assert!(parse("-5s").is_err());
        assert!(parse("99999999999999999999999h").is_err());
    }

    #[test]
    fn overflowing_input_is_an_error_never_a_panic() {
        // `u128::MAX / 1000` microseconds fill u128 to within 455 ns; a fraction of .9 µs
        // would overflow the sum.
        let near = format!("{}.9us", u128::MAX / 1000);
        assert!(parse(&near).is_err());
        assert!(parse(&format!("{}ns", u128::MAX)).is_err());
        assert!(parse(&format!("{}s", u128::from(u64::MAX) + 1)).is_err());
        // Digits past nanoseconds are dropped, not an overflow.
        assert_eq!(
            parse(&format!("1.{}s", "9".repeat(400))),
            Ok(Duration::new(1, 999_999_999))
        );
        assert!(parse(&"9".repeat(400)).is_err());
        assert!(parse("1.2.3s").is_err());
        // The issue 13 value parses (the CRD refuses it; the core clamps it).
        assert!(parse("5124095576030431h").is_ok());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_millis(150)), "150ms");
        assert_eq!(format(Duration::from_millis(2500)), "2.5s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_secs(300)), "5m0s");
    }
}
