//! Byte sizes in flags (`--max-render-bytes 32Mi`, `--render-memory-limit 1Gi`): a plain
//! number of bytes or one with a Kubernetes quantity suffix. Parsing never panics; a bad
//! value is clap's error and exit 2.

/// Parses `1048576`, `512Ki`, `32Mi`, `1Gi`, `1G`, `500M`.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected bytes, e.g. 33554432 or 32Mi"))?;
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "invalid size unit in {s:?} (use Ki, Mi, Gi, Ti, k, M, G, T)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// [`parse_size`] for counts and sizes that must be at least 1.
pub(crate) fn parse_positive_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err(format!("{s:?} must be at least 1")),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_bad_ones_are_errors_not_panics() {
        assert_eq!(parse_size("32Mi"), Ok(32 << 20));
        assert_eq!(parse_size("1Gi"), Ok(1 << 30));
        assert_eq!(parse_size("5000"), Ok(5000));
        assert_eq!(parse_size("2G"), Ok(2_000_000_000));
        for bad in [
            "",
            "-1",
            "1.5Gi",
            "1Xi",
            "99999999999999999999",
            "16777216Ti",
            "Mi",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_positive_size("0").is_err());
    }
}
