//! The synthesised render package, exactly as `LAYOUT.md` beside this file writes it:
//! `cue.mod/module.cue` (the module and the Platform's catalogs at the Platform's versions),
//! `instance/instance.cue`, `platform/platform.cue` and the glue, exported with
//! `cue export . --out json`. Every string is written as a JSON string literal (a valid CUE
//! string), values as JSON.

use std::collections::BTreeMap;
use std::path::Path;

use opm_core::opm::platform::{Catalog, Normalised};
use serde_json::Value;

use super::{GLUE, ModuleFacts};
use crate::cue::module_ref::{ModuleRef, RELEASE_LANGUAGE_VERSION, ReleaseIdentity};
use crate::cue::render::RenderError;

/// Module path of the synthesised render package (the glue imports its packages).
pub const RENDER_MODULE: &str = "opm.internal/render@v0";

/// A synthesised package: files by relative path, and the `cue` arguments to run in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// `(relative path, content)`.
    pub files: Vec<(String, String)>,
    /// e.g. `["export", ".", "--out", "json"]`.
    pub args: Vec<String>,
}

fn export_args() -> Vec<String> {
    ["export", ".", "--out", "json"].map(String::from).to_vec()
}

/// A JSON string literal with every non-ASCII character escaped: valid CUE, and no byte of
/// a tenant's string can end it early.
pub fn quote(s: &str) -> String {
    ascii(&Value::String(s.to_owned()).to_string())
}

fn ascii(json: &str) -> String {
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

/// `cue.mod/module.cue` of the render module: `deps` as given, then the catalogs (which win
/// over any pin of the same path in `deps`).
fn module_file(language: &str, deps: &[(String, String, bool)], catalogs: &[Catalog]) -> String {
    let mut out = format!(
        "module: {}\nlanguage: version: {}\ndeps: {{\n",
        quote(RENDER_MODULE),
        quote(language)
    );
    for (path, version, default) in deps {
        if catalogs.iter().any(|c| &c.path == path) {
            continue;
        }
        if *default {
            out.push_str(&format!(
                "\t{}: {{v: {}, default: true}}\n",
                quote(path),
                quote(version)
            ));
        } else {
            out.push_str(&format!("\t{}: v: {}\n", quote(path), quote(version)));
        }
    }
    for c in catalogs {
        out.push_str(&format!("\t{}: v: {}\n", quote(&c.path), quote(&c.version)));
    }
    out.push_str("}\n");
    out
}

/// `platform/platform.cue`: core's `#Platform` with every enabled catalog imported at the
/// version the module file pins (written without the `v`, as `#CatalogEntry` reads it).
pub fn platform_file(platform: &Normalised) -> String {
    let mut imports = String::from("\tcore \"opmodel.dev/core@v2\"\n");
    let mut registry = String::new();
    for (i, c) in platform.catalogs.iter().enumerate() {
        imports.push_str(&format!("\tcatalog{i} {}\n", quote(&c.path)));
        let bare = c.version.strip_prefix('v').unwrap_or(&c.version);
        registry.push_str(&format!(
            "\t{}: {{\n\t\tversion:  {}\n\t\tenable:   true\n\t\t#catalog: catalog{i}\n\t}}\n",
            quote(&c.path),
            quote(bare)
        ));
    }
    format!(
        "package platform\n\nimport (\n{imports})\n\ncore.#Platform\n\nmetadata: name: \"cluster\"\ntype: {}\n#registry: {{\n{registry}}}\n",
        quote(&platform.type_)
    )
}

fn instance_file(module: &ModuleRef, values: &Value, identity: &ReleaseIdentity) -> String {
    let values = ascii(&serde_json::to_string_pretty(values).unwrap_or_else(|_| "{}".into()));
    format!(
        "package instance\n\nimport (\n\tcore \"opmodel.dev/core@v2\"\n\tmod {}\n)\n\ncore.#ModuleInstance\n\nmetadata: {{\n\tname:      {}\n\tnamespace: {}\n}}\n#module: mod\nvalues: {values}\n",
        quote(&module.path),
        quote(&identity.name),
        quote(&identity.namespace),
    )
}

/// The glue's import of the instance package; a batch gives each member its own.
const GLUE_INSTANCE_IMPORT: &str = "\"opm.internal/render/instance\"";

/// The field of member `i` in a batch export.
pub fn batch_field(i: usize) -> String {
    format!("r{i}")
}

/// Several releases of one module version through one Platform in one package (one `cue`
/// run; the platform package and the catalogs are loaded once): member `i` is the directory
/// `m<i>/` holding (a)'s instance package and a copy of the glue importing it, exported as
/// the field [`batch_field`]`(i)`, whose value is exactly what (a) exports for it. `None`
/// when the glue's instance import cannot be re-pointed (then every release renders alone).
pub fn batch_files(
    module: &ModuleRef,
    platform: &Normalised,
    members: &[(&Value, &ReleaseIdentity)],
) -> Option<Files> {
    if GLUE.matches(GLUE_INSTANCE_IMPORT).count() != 1 {
        return None;
    }
    let deps = vec![(module.path.clone(), module.version.clone(), false)];
    let mut files = vec![
        (
            "cue.mod/module.cue".to_owned(),
            module_file(RELEASE_LANGUAGE_VERSION, &deps, &platform.catalogs),
        ),
        ("platform/platform.cue".to_owned(), platform_file(platform)),
    ];
    let mut imports = String::new();
    let mut fields = String::new();
    for (i, (values, identity)) in members.iter().enumerate() {
        let values = match values {
            Value::Null => Value::Object(Default::default()),
            Value::Object(_) => (*values).clone(),
            _ => return None,
        };
        files.push((
            format!("m{i}/instance/instance.cue"),
            instance_file(module, &values, identity),
        ));
        let own = format!("\"opm.internal/render/m{i}/instance\"");
        files.push((
            format!("m{i}/glue.cue"),
            GLUE.replacen(GLUE_INSTANCE_IMPORT, &own, 1),
        ));
        imports.push_str(&format!("\tg{i} \"opm.internal/render/m{i}:glue\"\n"));
        fields.push_str(&format!("{}: g{i}\n", batch_field(i)));
    }
    files.push((
        "batch.cue".to_owned(),
        format!("package batch\n\nimport (\n{imports})\n\n{fields}"),
    ));
    Some(Files {
        files,
        args: export_args(),
    })
}

/// The render package of a ModuleRelease (LAYOUT.md (a)).
pub fn module_files(
    module: &ModuleRef,
    _facts: &ModuleFacts,
    platform: &Normalised,
    values: &Value,
    identity: &ReleaseIdentity,
) -> Result<Files, RenderError> {
    let values = match values {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => values.clone(),
        other => {
            return Err(RenderError::Evaluation {
                message: format!("values must be a struct, got {other}"),
            });
        }
    };
    let instance = instance_file(module, &values, identity);
    let deps = vec![(module.path.clone(), module.version.clone(), false)];
    Ok(Files {
        files: vec![
            (
                "cue.mod/module.cue".into(),
                module_file(RELEASE_LANGUAGE_VERSION, &deps, &platform.catalogs),
            ),
            ("instance/instance.cue".into(), instance),
            ("platform/platform.cue".into(), platform_file(platform)),
            ("glue.cue".into(), GLUE.to_owned()),
        ],
        args: export_args(),
    })
}

/// The package evaluated for the Platform's status: the platform package alone, exporting
/// the number of transformers of each enabled catalog.
pub fn platform_files(platform: &Normalised) -> Result<Files, RenderError> {
    Ok(Files {
        files: vec![
            (
                "cue.mod/module.cue".into(),
                module_file(RELEASE_LANGUAGE_VERSION, &[], &platform.catalogs),
            ),
            ("platform/platform.cue".into(), platform_file(platform)),
        ],
        args: [
            "export",
            "./platform",
            "--out",
            "json",
            "-e",
            PLATFORM_EXPRESSION,
        ]
        .map(String::from)
        .to_vec(),
    })
}

/// What the Platform's evaluation exports (LAYOUT.md): the composed transformers' FQNs and,
/// per catalog, its version and transformer count. Reading `e.version` is what checks each
/// pin against the catalog's own bytes.
pub const PLATFORM_EXPRESSION: &str = "{transformers: [for k, _ in #composedTransformers {k}], catalogs: [for p, e in #registry {path: p, version: e.version, transformers: len(e.#transformers)}]}";

/// `(catalog path, transformers)` from the Platform evaluation's export.
pub fn transformer_counts(bytes: &[u8]) -> Result<Vec<(String, i64)>, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("cue output: {e}"))?;
    let catalogs = v
        .get("catalogs")
        .and_then(Value::as_array)
        .ok_or_else(|| "the platform package's export has no catalogs".to_owned())?;
    Ok(catalogs
        .iter()
        .filter_map(|c| {
            let path = c.get("path")?.as_str()?.to_owned();
            Some((path, c.get("transformers")?.as_i64().unwrap_or_default()))
        })
        .collect())
}

/// The `package` clause of a CUE file (`None`: none found).
pub fn package_name(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("package ")?;
        let name = rest.split_whitespace().next()?;
        (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .then(|| name.to_owned())
    })
}

/// An artifact's module file: its language version and its deps (`path → (version, default)`).
pub type ArtifactModule = (String, BTreeMap<String, (String, bool)>);

/// The artifact's module file as `cue export` gave it.
pub fn artifact_module(bytes: &[u8]) -> Result<ArtifactModule, String> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the artifact's module file: {e}"))?;
    let language = v
        .pointer("/language/version")
        .and_then(Value::as_str)
        .unwrap_or(RELEASE_LANGUAGE_VERSION)
        .to_owned();
    let mut deps = BTreeMap::new();
    if let Some(m) = v.get("deps").and_then(Value::as_object) {
        for (path, d) in m {
            let Some(version) = d.get("v").and_then(Value::as_str) else {
                continue;
            };
            let default = d.get("default").and_then(Value::as_bool).unwrap_or(false);
            deps.insert(path.clone(), (version.to_owned(), default));
        }
    }
    Ok((language, deps))
}

/// The render package of a Release's authored instance (LAYOUT.md (b)): `dir` is
/// `spec.path` inside the artifact; `module` the artifact's module file as
/// [`artifact_module`] read it.
pub fn instance_files(
    dir: &Path,
    module: &ArtifactModule,
    platform: &Normalised,
) -> Result<Files, RenderError> {
    let io = |e: std::io::Error| RenderError::Io {
        message: format!("reading the instance package: {e}"),
    };
    let instance_text =
        std::fs::read_to_string(dir.join(opm_core::opm::INSTANCE_FILE)).map_err(io)?;
    let package = package_name(&instance_text).ok_or_else(|| RenderError::Evaluation {
        message: "instance.cue has no package clause".into(),
    })?;
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_file = e.file_type().map_err(io)?.is_file();
        if is_file && name.ends_with(".cue") {
            let text = std::fs::read_to_string(e.path()).map_err(io)?;
            files.push((format!("release/{name}"), text));
        }
    }
    let (language, deps) = module;
    let language = if version_key(language) < version_key(RELEASE_LANGUAGE_VERSION) {
        RELEASE_LANGUAGE_VERSION.to_owned()
    } else {
        language.clone()
    };
    let deps: Vec<(String, String, bool)> = deps
        .iter()
        .map(|(p, (v, d))| (p.clone(), v.clone(), *d))
        .collect();
    files.push((
        "cue.mod/module.cue".into(),
        module_file(&language, &deps, &platform.catalogs),
    ));
    files.push((
        "instance/instance.cue".into(),
        format!(
            "package instance\n\nimport authored {}\n\nauthored\n",
            quote(&format!("opm.internal/render/release:{package}"))
        ),
    ));
    files.push(("platform/platform.cue".into(), platform_file(platform)));
    files.push(("glue.cue".into(), GLUE.to_owned()));
    Ok(Files {
        files,
        args: export_args(),
    })
}

/// `v0.17.0` → `[0, 17, 0]`, for ordering language versions.
fn version_key(v: &str) -> Vec<u64> {
    v.trim_start_matches('v')
        .split(['.', '-'])
        .take(3)
        .map(|n| n.parse().unwrap_or(0))
        .collect()
}
