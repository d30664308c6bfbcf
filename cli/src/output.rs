//! Output formats (`-o table|wide|yaml|json`), kubectl-style tables and ages.

use clap::{Args, ValueEnum};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::error::{CliError, Result};

/// `text` as it may reach a terminal: messages of a release quote what a tenant
/// wrote (names, CUE, CEL and API errors), so control characters other than newline and
/// tab, and bidirectional overrides, are removed; an ESC in a condition message would
/// otherwise drive the user's terminal.
pub fn for_terminal(text: &str) -> String {
    opm_core::conditions::without_control(text)
}

/// `-o`: how a verb prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Columns for people (the default).
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// YAML of the objects or the report.
    Yaml,
    /// JSON of the objects or the report (for scripts and bots).
    Json,
}

/// The `-o` flag.
#[derive(Debug, Args, Clone, Default)]
pub struct Out {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A value as pretty JSON or YAML text.
pub fn structured<T: Serialize>(value: &T, format: Format) -> Result<String> {
    match format {
        Format::Yaml => serde_saphyr::to_string(value)
            .map_err(|e| CliError::Other(format!("writing YAML: {e}"))),
        _ => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Other(format!("writing JSON: {e}"))),
    }
}

/// Left-aligned columns separated by three spaces, as kubectl prints them; the last
/// column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut s = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            s.push_str(c);
            if i + 1 < n {
                let pad = widths[i] - c.chars().count() + 3;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// A duration the way kubectl shows ages: `42s`, `3m12s`, `25m`, `4h30m`, `36h`, `3d4h`,
/// `120d`, `3y45d`.
pub fn human(d: SignedDuration) -> String {
    let s = d.as_secs().max(0);
    let (m, h, day) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        let rest = s % 60;
        if rest == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rest}s")
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        let rest = m % 60;
        if rest == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rest}m")
        }
    } else if h < 48 {
        format!("{h}h")
    } else if day < 8 {
        let rest = h % 24;
        if rest == 0 {
            format!("{day}d")
        } else {
            format!("{day}d{rest}h")
        }
    } else if day < 365 * 2 {
        format!("{day}d")
    } else {
        let (y, rest) = (day / 365, day % 365);
        if rest == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{rest}d")
        }
    }
}

/// Age of a past time (`<unknown>` when absent).
pub fn age(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => human(now.duration_since(t)),
        None => "<unknown>".into(),
    }
}

/// When a future time comes: `in 40s`, or `now` once it has passed (`-` when absent).
pub fn until(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) if t > now => format!("in {}", human(t.duration_since(now))),
        Some(_) => "now".into(),
        None => "-".into(),
    }
}

/// `<time> (<age> ago)` for messages.
pub fn when(t: Timestamp, now: Timestamp) -> String {
    let t = Timestamp::from_second(t.as_second()).unwrap_or(t);
    if t > now {
        format!("{t} (in {})", human(t.duration_since(now)))
    } else {
        format!("{t} ({} ago)", human(now.duration_since(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let s = |n: i64| human(SignedDuration::from_secs(n));
        assert_eq!(s(0), "0s");
        assert_eq!(s(119), "119s");
        assert_eq!(s(192), "3m12s");
        assert_eq!(s(600), "10m");
        assert_eq!(s(4 * 3600 + 1800), "4h30m");
        assert_eq!(s(36 * 3600), "36h");
        assert_eq!(s(3 * 86_400 + 4 * 3600), "3d4h");
        assert_eq!(s(120 * 86_400), "120d");
        assert_eq!(s(-5), "0s");
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let t = table(
            &["NAME", "READY"],
            &[vec!["a-long-name".into(), "True".into()]],
        );
        assert_eq!(t, "NAME          READY\na-long-name   True\n");
    }
}
