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

/// YAML (JSON is YAML) into a JSON value; an empty document is an empty mapping.
///
/// A plain number written with leading zeros (`pin: 0042`) stays the string it is: read
/// as a number it became the float `42.0` (and YAML 1.1, Kubernetes' own, reads it as
/// octal 34), silently changing a PIN or an account number (issue 31 item 8). The
/// module's `#config` says whether it wanted a number.
pub fn parse(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let mut options = serde_saphyr::Options::default();
    options.leading_zero_numbers_as_strings = true;
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
        let m = e.to_string();
        m.lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
