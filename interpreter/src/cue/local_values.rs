//! `opm-operator render --values-from-file`: the same merge as a ModuleRelease's
//! `valuesFrom` (SPEC §27, [`opm_core::values_from::compose`]) from local files, so a module
//! author renders locally what the operator would.
//!
//! `--values-from-file FILE` is a YAML/JSON mapping merged at the root;
//! `--values-from-file TARGET.PATH=FILE` sets the file's text as one string at that dot
//! path (as `targetPath` does). The part before the first `=` is a target path only when
//! it holds no `/` (write `./a=b.yaml` for a file whose name has a `=`). `--values` is
//! merged last.

use std::path::{Path, PathBuf};

use opm_core::api::values_from::{ValuesKind, ValuesReference};
use opm_core::values_from::{ValuesContent, compose};
use serde_json::Value;

/// One `--values-from-file` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// The dot path the file's text is set at; `None` merges the file at the root.
    pub target_path: Option<String>,
    /// The file read.
    pub file: PathBuf,
}

impl std::str::FromStr for FileRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (target, file) = match s.split_once('=') {
            Some((t, f)) if !t.contains('/') && !t.is_empty() && !f.is_empty() => {
                opm_core::values_from::parse_target_path(t)?;
                (Some(t.to_string()), f)
            }
            _ => (None, s),
        };
        if file.is_empty() {
            return Err("empty file name".into());
        }
        Ok(FileRef {
            target_path: target,
            file: PathBuf::from(file),
        })
    }
}

/// The merged values of `files` in order, then `values` (the `--values` file) on top.
pub fn merged(files: &[FileRef], values: Option<&Path>) -> Result<Value, String> {
    let read =
        |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()));
    let mut refs = Vec::new();
    let mut contents = Vec::new();
    for f in files {
        let text = read(&f.file)?;
        let value = match &f.target_path {
            Some(_) => Value::String(text),
            None => parse(&text).map_err(|e| format!("parsing {}: {e}", f.file.display()))?,
        };
        refs.push(ValuesReference {
            kind: ValuesKind::ConfigMap,
            name: f.file.display().to_string(),
            values_key: None,
            target_path: f.target_path.clone(),
            optional: false,
        });
        contents.push(Ok(ValuesContent::Found { value }));
    }
    let values = match values {
        Some(p) => Some(parse(&read(p)?).map_err(|e| format!("parsing {}: {e}", p.display()))?),
        None => None,
    };
    compose("local", &refs, &contents, values.as_ref(), None)
        .map(|v| v.unwrap_or(Value::Null))
        .map_err(|f| f.message)
}

/// Why [`parse_bounded`] gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundedParseError {
    /// Not YAML or JSON; the parser's first line (it may quote the content).
    #[error("{0}")]
    Invalid(String),
    /// The parsed content passed the budget after `counted` bytes.
    #[error("the parsed content passed {budget} bytes after {counted}")]
    TooLarge {
        /// Bytes counted when parsing stopped (more than `budget`).
        counted: u64,
        /// What was allowed.
        budget: u64,
    },
}

/// Fewest alias replays the parser allows on top of the byte count: the byte count is the
/// bound, this only keeps the parser's own replay work small.
const MAX_REPLAYED_EVENTS: usize = 262_144;

/// YAML (JSON is YAML) into a JSON value and its size as
/// [`opm_core::values_from::size_of`] measures it, stopping as soon as the size passes
/// `budget` (SPEC §24 `--max-values-bytes`). The size is counted while the parser hands
/// over each node, aliases replayed included, so a YAML anchor bomb (600 KiB that expands
/// to 58 MiB) stops at the budget and is never built in full.
pub fn parse_bounded(text: &str, budget: u64) -> Result<(Value, u64), BoundedParseError> {
    if text.trim().is_empty() {
        let v = Value::Object(Default::default());
        let n = opm_core::values_from::size_of(&v);
        return if n > budget {
            Err(BoundedParseError::TooLarge { counted: n, budget })
        } else {
            Ok((v, n))
        };
    }
    let counter = bounded::Counter::new(budget);
    let mut options = serde_saphyr::Options::default();
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde::de::DeserializeSeed::deserialize(bounded::Sized(&counter), de)
    });
    let counted = counter.used();
    if counted > budget {
        return Err(BoundedParseError::TooLarge { counted, budget });
    }
    match parsed {
        Ok(v) => Ok((v, counted)),
        Err(e) => Err(BoundedParseError::Invalid(first_line(&e.to_string()))),
    }
}

fn first_line(m: &str) -> String {
    m.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

/// A JSON value built from serde events, counting [`opm_core::values_from::size_of`] as
/// it goes and failing once the count passes the budget.
mod bounded {
    use std::cell::Cell;
    use std::fmt;

    use opm_core::values_from::MIN_VALUE_BYTES;
    use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    pub(super) struct Counter {
        used: Cell<u64>,
        budget: u64,
    }

    impl Counter {
        pub(super) fn new(budget: u64) -> Self {
            Self {
                used: Cell::new(0),
                budget,
            }
        }

        pub(super) fn used(&self) -> u64 {
            self.used.get()
        }

        /// Charges what a container that started at `start` still owes to reach the
        /// minimum.
        fn top_up<E: Error>(&self, start: u64) -> Result<(), E> {
            let spent = self.used().saturating_sub(start);
            self.charge(MIN_VALUE_BYTES.saturating_sub(spent))
        }

        fn charge<E: Error>(&self, n: u64) -> Result<(), E> {
            let used = self.used.get().saturating_add(n);
            self.used.set(used);
            if used > self.budget {
                return Err(E::custom("values passed --max-values-bytes"));
            }
            Ok(())
        }
    }

    #[derive(Clone, Copy)]
    pub(super) struct Sized<'a>(pub(super) &'a Counter);

    impl<'de> DeserializeSeed<'de> for Sized<'_> {
        type Value = Value;

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    /// A scalar's charge: its bytes, at least [`MIN_VALUE_BYTES`].
    fn scalar(n: u64) -> u64 {
        n.max(MIN_VALUE_BYTES)
    }

    impl<'de> Visitor<'de> for Sized<'_> {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a YAML or JSON value")
        }

        fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
            self.0.charge(scalar(0))?;
            Ok(Value::Bool(v))
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
            self.0.charge(scalar(0))?;
            Ok(Value::Number(v.into()))
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
            self.0.charge(scalar(0))?;
            Ok(Value::Number(v.into()))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
            self.0.charge(scalar(0))?;
            Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
            // Charged before the copy: a huge replayed scalar is refused unbuilt.
            self.0.charge(scalar(v.len() as u64 + 2))?;
            Ok(Value::String(v.to_owned()))
        }

        fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
            self.0.charge(scalar(v.len() as u64 + 2))?;
            Ok(Value::String(v))
        }

        fn visit_unit<E: Error>(self) -> Result<Value, E> {
            self.0.charge(scalar(0))?;
            Ok(Value::Null)
        }

        fn visit_none<E: Error>(self) -> Result<Value, E> {
            self.visit_unit()
        }

        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            self.deserialize(d)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            // A container counts its brackets, then its items as they come, and at least
            // the minimum in all: exactly what `size_of` says of the result.
            let start = self.0.used();
            self.0.charge(2)?;
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(self)? {
                out.push(v);
            }
            self.0.top_up(start)?;
            Ok(Value::Array(out))
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let start = self.0.used();
            self.0.charge(2)?;
            let mut out = Map::new();
            while let Some(k) = map.next_key::<String>()? {
                self.0.charge(k.len() as u64 + 3)?;
                let v = map.next_value_seed(self)?;
                // A key given twice replaces its value; the first one's count stays
                // (counted, so never more built than the budget).
                out.insert(k, v);
            }
            self.0.top_up(start)?;
            Ok(Value::Object(out))
        }
    }
}

/// YAML (JSON is YAML) into a JSON value; an empty document is an empty mapping.
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| first_line(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An anchor bomb: 10 KiB of text that expands to 10 MiB.
    fn anchor_bomb() -> String {
        let mut y = format!("a: &a [\"{}\"]\n", "x".repeat(1000));
        for (name, prev) in [("b", "a"), ("c", "b"), ("d", "c")] {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            y.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        y.push_str(&format!("e: [{}]\n", ["*d"; 10].join(", ")));
        y
    }

    #[test]
    fn a_bounded_parse_stops_an_anchor_bomb_at_the_budget() {
        let y = anchor_bomb();
        assert!(y.len() < 2_000, "{}", y.len());
        let budget = 4 * 1024 * 1024;
        match parse_bounded(&y, budget) {
            Err(BoundedParseError::TooLarge { counted, .. }) => {
                // Stopped on the first node past the budget, not after expanding it all.
                assert!(counted > budget && counted < budget + 2_000, "{counted}");
            }
            other => panic!("{other:?}"),
        }
        // Under a larger budget it parses, and the size is what the core measures.
        let (v, n) = parse_bounded(&y, 64 * 1024 * 1024).unwrap();
        assert_eq!(n, opm_core::values_from::size_of(&v));
        assert!(n > 10_000_000, "{n}");
    }

    #[test]
    fn a_bounded_parse_counts_like_the_core() {
        for y in ["a: 1\nb: [x, {c: true}]\n", "{}", "  ", "k: null\n"] {
            let (v, n) = parse_bounded(y, 1 << 20).unwrap();
            assert_eq!(v, parse(y).unwrap());
            assert_eq!(n, opm_core::values_from::size_of(&v), "{y}");
        }
        assert!(matches!(
            parse_bounded("a: [unclosed", 1 << 20),
            Err(BoundedParseError::Invalid(_))
        ));
        assert!(matches!(
            parse_bounded("a: 1\n", 10),
            Err(BoundedParseError::TooLarge { .. })
        ));
    }

    #[test]
    fn arguments_name_a_file_or_a_path_and_a_file() {
        let r: FileRef = "base.yaml".parse().unwrap();
        assert_eq!(r.target_path, None);
        let r: FileRef = "db.password=pw.txt".parse().unwrap();
        assert_eq!(r.target_path.as_deref(), Some("db.password"));
        assert_eq!(r.file, PathBuf::from("pw.txt"));
        let r: FileRef = "./a=b.yaml".parse().unwrap();
        assert_eq!((r.target_path, r.file), (None, PathBuf::from("./a=b.yaml")));
        assert!("a..b=x".parse::<FileRef>().is_err());
    }

    #[test]
    fn files_merge_in_order_with_values_last() {
        let d = tempfile::tempdir().unwrap();
        let w = |n: &str, t: &str| {
            std::fs::write(d.path().join(n), t).unwrap();
            d.path().join(n)
        };
        let base = w("base.yaml", "db: {host: a, port: 1}\nreplicas: 1\n");
        let pw = w("pw", "p: w");
        let vals = w("values.yaml", "replicas: 3\n");
        let files = [
            FileRef {
                target_path: None,
                file: base,
            },
            FileRef {
                target_path: Some("db.password".into()),
                file: pw,
            },
        ];
        let got = merged(&files, Some(&vals)).unwrap();
        assert_eq!(
            got,
            serde_json::json!({"db": {"host": "a", "port": 1, "password": "p: w"}, "replicas": 3})
        );
    }
}
