//! `KIND/NAME` (or `KIND NAME`) arguments. KIND is `mr`, `rel`, or the kind's name in any
//! case, singular or plural, optionally with its group (`modulereleases.releases.opmodel.dev`).

use opm_core::Kind;

use crate::error::{CliError, Result};

/// Parses a kind as kubectl users write it.
pub fn parse_kind(s: &str) -> Result<Kind> {
    let lower = s.to_ascii_lowercase();
    let bare = lower
        .strip_suffix(".releases.opmodel.dev")
        .unwrap_or(&lower);
    match bare {
        "mr" | "modulerelease" | "modulereleases" => Ok(Kind::ModuleRelease),
        "rel" | "release" | "releases" => Ok(Kind::Release),
        _ => Err(CliError::Usage(format!(
            "unknown kind {s:?}: use mr (ModuleRelease) or rel (Release)"
        ))),
    }
}

/// What a verb was asked about: a kind and maybe a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Option<Kind>,
    pub name: Option<String>,
}

/// `[]`, `[KIND]`, `[KIND/NAME]` or `[KIND, NAME]`.
pub fn parse(args: &[String]) -> Result<Target> {
    match args {
        [] => Ok(Target {
            kind: None,
            name: None,
        }),
        [one] => match one.split_once('/') {
            Some((k, n)) if !n.is_empty() && !n.contains('/') => Ok(Target {
                kind: Some(parse_kind(k)?),
                name: Some(n.to_string()),
            }),
            Some(_) => Err(CliError::Usage(format!(
                "{one:?} is not KIND/NAME (e.g. mr/web)"
            ))),
            None => Ok(Target {
                kind: Some(parse_kind(one)?),
                name: None,
            }),
        },
        [k, n] if !k.contains('/') && !n.contains('/') => Ok(Target {
            kind: Some(parse_kind(k)?),
            name: Some(n.clone()),
        }),
        _ => Err(CliError::Usage(format!(
            "expected KIND/NAME or KIND NAME, got {}",
            args.join(" ")
        ))),
    }
}

/// A target that must name one release.
pub fn one(args: &[String]) -> Result<(Kind, String)> {
    match parse(args)? {
        Target {
            kind: Some(k),
            name: Some(n),
        } => Ok((k, n)),
        _ => Err(CliError::Usage(
            "name one release as KIND/NAME, e.g. mr/web or rel/hello".into(),
        )),
    }
}

/// `mr` / `rel`, as the output names kinds in short form.
pub fn short(kind: Kind) -> &'static str {
    match kind {
        Kind::ModuleRelease => "mr",
        Kind::Release => "rel",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn kinds_in_every_spelling() {
        for k in [
            "mr",
            "MR",
            "ModuleRelease",
            "modulereleases",
            "modulereleases.releases.opmodel.dev",
        ] {
            assert_eq!(parse_kind(k).unwrap(), Kind::ModuleRelease, "{k}");
        }
        for k in ["rel", "Release", "releases"] {
            assert_eq!(parse_kind(k).unwrap(), Kind::Release, "{k}");
        }
        let e = parse_kind("deploy").unwrap_err().to_string();
        assert!(e.contains("unknown kind \"deploy\""), "{e}");
    }

    #[test]
    fn names_with_a_slash_or_a_space() {
        assert_eq!(
            one(&s(&["mr/web"])).unwrap(),
            (Kind::ModuleRelease, "web".into())
        );
        assert_eq!(
            one(&s(&["rel", "shop"])).unwrap(),
            (Kind::Release, "shop".into())
        );
        assert!(one(&s(&["mr"])).is_err());
        assert!(one(&s(&["mr/"])).is_err());
        assert!(one(&s(&["mr/a/b"])).is_err());
        assert!(parse(&s(&["mr/a", "b"])).is_err());
        assert_eq!(parse(&s(&[])).unwrap().kind, None);
    }
}
