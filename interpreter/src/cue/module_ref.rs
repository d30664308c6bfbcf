//! A `ModuleRelease`'s module reference and the release package synthesised for it
//! (DESIGN §3).
//!
//! The reference is validated before `cue` runs: a malformed version or one whose major does
//! not match the path's `@vN` can never resolve, and saying so here gives a clearer message
//! than `cue`'s invalid-module-file error.

use serde_json::Value;

use crate::cue::render_error::RenderError;

/// Module path of the synthesised release package.
pub const RELEASE_MODULE: &str = "opm.internal/release@v0";
/// CUE language version of the synthesised package (accepted by the pinned cue v0.17.1).
pub const RELEASE_LANGUAGE_VERSION: &str = "v0.17.0";

/// A validated module reference: `path` always carries its `@vN` major suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRef {
    /// e.g. `example.com/modules/web@v0`.
    pub path: String,
    /// e.g. `v0.2.1`.
    pub version: String,
    /// The CUE package imported from the module root.
    pub package: String,
}

/// The release identity handed to the module as `#release`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseIdentity {
    /// `metadata.name` of the ModuleRelease.
    pub name: String,
    /// Its namespace, where every namespaced object it renders lands.
    pub namespace: String,
}

fn resolution(message: String) -> RenderError {
    RenderError::Resolution { message }
}

impl ModuleRef {
    /// Validates `spec.module.path` / `spec.module.version`. A path without `@vN` gets the
    /// version's major; the package defaults to the path's last element.
    pub fn new(path: &str, version: &str, package: Option<&str>) -> Result<Self, RenderError> {
        let major = semver_major(version).ok_or_else(|| {
            resolution(format!(
                "invalid module version {version:?}: want vMAJOR.MINOR.PATCH"
            ))
        })?;
        let (base, suffix) = match path.rsplit_once('@') {
            Some((base, suffix)) => (base, Some(suffix)),
            None => (path, None),
        };
        if !valid_base(base) {
            return Err(resolution(format!("invalid module path {path:?}")));
        }
        if let Some(suffix) = suffix {
            let path_major = suffix
                .strip_prefix('v')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
                .ok_or_else(|| {
                    resolution(format!(
                        "invalid major version suffix in module path {path:?}"
                    ))
                })?;
            if path_major != major {
                return Err(resolution(format!(
                    "module version {version} does not match the major version of {path} (want v{path_major}.x.y)"
                )));
            }
        }
        let last = base.rsplit('/').next().unwrap_or(base);
        let package = package.unwrap_or(last);
        if !is_identifier(package) {
            return Err(resolution(format!(
                "cannot use {package:?} as the CUE package name of {path}"
            )));
        }
        Ok(Self {
            path: format!("{base}@v{major}"),
            version: version.to_owned(),
            package: package.to_owned(),
        })
    }

    /// Parses the command-line form `path@version` (`example.com/modules/web@v0.2.1`, or with
    /// the major suffix: `example.com/modules/web@v0@v0.2.1`).
    pub fn parse(spec: &str) -> Result<Self, RenderError> {
        let (path, version) = spec
            .rsplit_once('@')
            .ok_or_else(|| resolution(format!("module {spec:?} has no @version")))?;
        Self::new(path, version, None)
    }
}

/// The major of `vMAJOR.MINOR.PATCH[-pre][+build]`.
fn semver_major(v: &str) -> Option<u64> {
    let rest = v.strip_prefix('v')?;
    let (core, extra) = match rest.find(['-', '+']) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let nums: Vec<&str> = core.split('.').collect();
    if nums.len() != 3
        || nums
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let extra_ok = extra
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
    if !extra_ok || (rest.len() > core.len() && extra.is_empty()) {
        return None;
    }
    nums[0].parse().ok()
}

fn valid_base(base: &str) -> bool {
    !base.is_empty()
        && base.split('/').all(|el| {
            !el.is_empty()
                && el != "."
                && el != ".."
                && el
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~'))
        })
}

fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The two files of the synthesised release package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFiles {
    /// `cue.mod/module.cue`: the module as the package's one dependency.
    pub module_cue: String,
    /// `release.cue`: the module's `#config` unified with the values and identity.
    pub release_cue: String,
}

/// Builds the release package of DESIGN §3. `#config` is unified through a reference to the
/// module's own `#config` so that its closedness applies: an unknown key in `values` is an
/// error rather than silently ignored. JSON is valid CUE, so values and names are embedded as
/// serde_json output (which also quotes them safely).
pub fn synthesise_release(
    module: &ModuleRef,
    values: &Value,
    identity: &ReleaseIdentity,
) -> Result<ReleaseFiles, RenderError> {
    let body = release_body(values, identity)?;
    Ok(ReleaseFiles {
        module_cue: module_cue(module),
        release_cue: format!("{}{body}", package_header(module)),
    })
}

/// The field of member `i` in a batch package (and in its export).
pub fn batch_field(i: usize) -> String {
    format!("r{i}")
}

/// One package holding several releases of the same module version, member `i` as the
/// field [`batch_field`]`(i)` whose body is exactly [`synthesise_release`]'s package body:
/// the same values, identity and `#config` unification, so each field exports to the
/// value the release's own package exports (issue 18: one `cue` run for many releases).
pub fn synthesise_batch(
    module: &ModuleRef,
    members: &[(&Value, &ReleaseIdentity)],
) -> Result<ReleaseFiles, RenderError> {
    let mut release_cue = package_header(module);
    for (i, (values, identity)) in members.iter().enumerate() {
        let body = release_body(values, identity)?;
        release_cue.push_str(&format!("{}: {{\n{body}}}\n\n", batch_field(i)));
    }
    Ok(ReleaseFiles {
        module_cue: module_cue(module),
        release_cue,
    })
}

fn quote(s: &str) -> String {
    ascii_cue(&Value::String(s.to_owned()).to_string())
}

fn module_cue(module: &ModuleRef) -> String {
    format!(
        "module: {}\nlanguage: version: {}\ndeps: {}: v: {}\n",
        quote(RELEASE_MODULE),
        quote(RELEASE_LANGUAGE_VERSION),
        quote(&module.path),
        quote(&module.version),
    )
}

fn package_header(module: &ModuleRef) -> String {
    format!(
        "package release\n\nimport m {}\n\n",
        quote(&format!("{}:{}", module.path, module.package))
    )
}

/// The declarations of one release: its values, the module instance and the exported fields.
fn release_body(values: &Value, identity: &ReleaseIdentity) -> Result<String, RenderError> {
    let values = match values {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => values.clone(),
        other => {
            return Err(RenderError::Evaluation {
                message: format!("values must be a struct, got {other}"),
            });
        }
    };
    let identity_cue = format!(
        "{{name: {}, namespace: {}}}",
        quote(&identity.name),
        quote(&identity.namespace)
    );
    Ok(format!(
        "_values: {values}\n\n_m: m & {{\n\t#config: m.#config & _values\n\t#release: {identity_cue}\n}}\n\nkind: \"ModuleRelease\"\nmetadata: {identity_cue}\ncomponents: _m.components\n",
        values = ascii_cue(&serde_json::to_string_pretty(&values).unwrap_or_else(|_| "{}".into())),
    ))
}

/// JSON text with every non-ASCII character written as a CUE escape (`\uXXXX`, or
/// `\UXXXXXXXX` beyond the BMP). CUE's scanner refuses some characters written raw: a
/// U+FEFF (byte order mark) anywhere but the file's start is "illegal byte order mark",
/// which stalled any release whose values held one (issue 13). In serde_json's output
/// non-ASCII only occurs inside string literals, where the escape means the same string.
fn ascii_cue(json: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c as u32 {
            0..=0x7f => out.push(c),
            n @ 0x80..=0xffff => {
                let _ = write!(out, "\\u{n:04x}");
            }
            n => {
                let _ = write!(out, "\\U{n:08x}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::local::Verdict;

    #[test]
    fn non_ascii_values_are_escaped_for_cue() {
        assert_eq!(
            ascii_cue("{\"a\": \"x\u{feff}é😀\"}"),
            "{\"a\": \"x\\ufeff\\u00e9\\U0001f600\"}"
        );
    }

    #[test]
    fn valid_references() {
        let m = ModuleRef::new("example.com/modules/web@v0", "v0.2.1", None).unwrap();
        assert_eq!(
            (m.path.as_str(), m.version.as_str(), m.package.as_str()),
            ("example.com/modules/web@v0", "v0.2.1", "web")
        );
        let m = ModuleRef::new("example.com/x/app", "v2.0.0-rc.1+meta", Some("app_pkg")).unwrap();
        assert_eq!(m.path, "example.com/x/app@v2");
        assert_eq!(m.package, "app_pkg");
        assert_eq!(
            ModuleRef::parse("example.com/modules/web@v0.2.1")
                .unwrap()
                .path,
            "example.com/modules/web@v0"
        );
        assert_eq!(
            ModuleRef::parse("example.com/modules/web@v0@v0.2.1")
                .unwrap()
                .version,
            "v0.2.1"
        );
    }

    #[test]
    fn invalid_references_are_resolution_errors() {
        let cases = [
            ("example.com/modules/web@v0", "v1.2.1"),
            ("example.com/modules/web@v1", "v0.2.1"),
            ("example.com/modules/web@v0", "0.2.1"),
            ("example.com/modules/web@v0", "v0.2"),
            ("example.com/modules/web@v0", "latest"),
            ("example.com/modules/web@v0", "v0.2.1-"),
            ("example.com/modules/web@x", "v0.2.1"),
            ("example.com//web@v0", "v0.2.1"),
            ("example.com/\"web@v0", "v0.2.1"),
            ("", "v0.2.1"),
            ("example.com/my-mod@v0", "v0.1.0"),
        ];
        for (path, version) in cases {
            let err = ModuleRef::new(path, version, None).unwrap_err();
            assert_eq!(err.reason(), "ResolutionFailed", "{path} {version}: {err}");
        }
    }

    #[test]
    fn synthesised_package_matches_the_contract() {
        let m = ModuleRef::new("example.com/modules/web@v0", "v0.2.1", None).unwrap();
        let id = ReleaseIdentity {
            name: "demo".into(),
            namespace: "team-a".into(),
        };
        let files = synthesise_release(&m, &serde_json::json!({"replicas": 2, "msg": "a\"b"}), &id)
            .unwrap();
        assert_eq!(
            files.module_cue,
            "module: \"opm.internal/release@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: \"example.com/modules/web@v0\": v: \"v0.2.1\"\n"
        );
        assert!(
            files
                .release_cue
                .starts_with("package release\n\nimport m \"example.com/modules/web@v0:web\"\n")
        );
        assert!(
            files.release_cue.contains("\"msg\": \"a\\\"b\""),
            "{}",
            files.release_cue
        );
        assert!(
            files
                .release_cue
                .contains("#release: {name: \"demo\", namespace: \"team-a\"}")
        );
        assert!(files.release_cue.contains("components: _m.components"));
        let err = synthesise_release(&m, &serde_json::json!([1]), &id).unwrap_err();
        assert_eq!(err.reason(), "RenderFailed");
    }
}
