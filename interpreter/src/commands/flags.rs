//! Value parsers of the operator's flags(a bad flag is a message and exit 2,
//! never a panic).
//!
//! Clap runs these while it parses the command line, so every refusal is a usage error
//! naming the flag, and nothing later (a rate-limit window, a lease renewal period, a
//! requeue) ever meets a value it cannot compute with.

use std::net::SocketAddr;
use std::time::Duration;

/// Longest duration any flag takes: the CRD's bound on `interval`/`timeout`.
pub(crate) const MAX_FLAG_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A duration in the CRD's syntax (`90s`, `1m30s`, `1.5h`, `250ms`) or plain seconds
/// (`30`), at most [`MAX_FLAG_DURATION`]; zero allowed.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        // Plain seconds, as the flags have always taken; too many digits is just too long.
        t.parse::<u64>()
            .ok()
            .map(Duration::from_secs)
            .unwrap_or(Duration::MAX)
    } else {
        opm_core::duration::parse(t)
            .map_err(|e| format!("{e} (use a duration such as 30s, 1m30s, 1.5h or 250ms)"))?
    };
    if d > MAX_FLAG_DURATION {
        return Err(format!("{s:?} is longer than 24h"));
    }
    Ok(d)
}

/// Like [`duration`], but more than zero (deadlines, lease durations).
pub(crate) fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} must be longer than zero"));
    }
    Ok(d)
}

/// A leader Lease duration: at least 1s, so a renewal every third of it is a real wait.
pub(crate) fn lease_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!("{s:?} is shorter than 1s"));
    }
    Ok(d)
}

/// `0` (disabled) or `host:port` with a numeric IP (`:8080` means every interface).
pub(crate) fn bind_address(s: &str) -> Result<String, String> {
    if s == "0" {
        return Ok(s.to_owned());
    }
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_owned()
    };
    full.parse::<SocketAddr>()
        .map(|_| full)
        .map_err(|_| format!("{s:?} is not `0` or an address such as 127.0.0.1:8080 or :8080"))
}

/// Requests per second: `0` (unlimited) or a finite rate from 0.01 to 1 000 000.
pub(crate) fn qps(s: &str) -> Result<f32, String> {
    let q: f32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if q == 0.0 || (q.is_finite() && (0.01..=1_000_000.0).contains(&q)) {
        Ok(q)
    } else {
        Err(format!(
            "{s:?} must be 0 (unlimited) or a rate from 0.01 to 1000000"
        ))
    }
}

/// A byte size: plain bytes or with a binary suffix (`Ki`, `Mi`, `Gi`, `Ti`); at least one
/// byte and at most 1 PiB.
pub(crate) fn byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => {
            return Err(format!(
                "{s:?} is not a size in bytes (e.g. 67108864 or 64Mi; suffixes Ki, Mi, Gi, Ti)"
            ));
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size in bytes (e.g. 67108864 or 64Mi)"))?;
    let bytes = n
        .checked_mul(mult)
        .filter(|b| *b <= 1 << 50)
        .ok_or_else(|| format!("{s:?} is larger than 1Pi"))?;
    if bytes == 0 {
        return Err(format!("{s:?} must be at least one byte"));
    }
    Ok(bytes)
}

/// A ServiceAccount name: a DNS-1123 subdomain (lowercase letters, digits, `-` and `.`,
/// at most 253 characters).
pub(crate) fn dns_subdomain(s: &str) -> Result<String, String> {
    if opm_core::names::is_dns1123_subdomain(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a valid name (lowercase letters, digits, '-' and '.', starting and \
             ending with a letter or digit, at most 253 characters)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_crd_syntax_and_plain_seconds() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(duration("24h"), Ok(MAX_FLAG_DURATION));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in [
            "",
            "5x",
            "-5s",
            "1.2.3s",
            "25h",
            "5124095576030431h",
            "99999999999999999999",
            "NaN",
            "inf",
            "1e3s",
            " ",
        ] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
        assert!(duration(&"9".repeat(400)).is_err());
        assert!(positive_duration("0s").is_err());
        assert!(lease_duration("500ms").is_err());
        assert_eq!(lease_duration("15s"), Ok(Duration::from_secs(15)));
    }

    #[test]
    fn addresses_rates_sizes_and_names() {
        assert_eq!(bind_address("0").as_deref(), Ok("0"));
        assert_eq!(bind_address(":8080").as_deref(), Ok("0.0.0.0:8080"));
        assert!(bind_address("127.0.0.1:8080").is_ok());
        assert!(bind_address("[::1]:8080").is_ok());
        for bad in ["", "localhost:8080", "1.2.3.4:99999", "8080", "x"] {
            assert!(bind_address(bad).is_err(), "{bad:?}");
        }
        assert_eq!(qps("0"), Ok(0.0));
        assert_eq!(qps("50"), Ok(50.0));
        for bad in ["NaN", "inf", "-1", "1e-40", "1e9", "x"] {
            assert!(qps(bad).is_err(), "{bad:?}");
        }
        assert_eq!(byte_size("64Mi"), Ok(64 << 20));
        assert_eq!(byte_size("1024"), Ok(1024));
        for bad in [
            "0",
            "-1",
            "64MB",
            "1.5Gi",
            "",
            "99999999999999999999",
            "2048Ti",
        ] {
            assert!(byte_size(bad).is_err(), "{bad:?}");
        }
        assert!(dns_subdomain("deployer").is_ok());
        assert!(dns_subdomain("a.b-c").is_ok());
        for bad in ["", "Not A Name", "-a", "a_b", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
    }
}
