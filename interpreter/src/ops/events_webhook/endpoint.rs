//! The receiver's URL (`--events-webhook`), which may carry credentials in its user info,
//! path or query (a token in a chat webhook's path is common): shown anywhere only as
//! scheme, host and port, and refused without echoing it.

use std::fmt;

/// A parsed `http`/`https` receiver URL. `Display` and `Debug` show only its scheme, host
/// and port (with `/…` when it has more), never its credentials, path or query.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint(reqwest::Url);

/// Why a receiver URL was refused. No variant quotes any part of the value: a mistyped URL
/// may still hold a real credential (even where the scheme should be).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Not a URL at all: the parser's reason (which never quotes the input).
    #[error("not an absolute URL ({0})")]
    NotAbsolute(String),
    /// Another scheme than `http` or `https`.
    #[error("the scheme must be http or https")]
    Scheme,
    /// `http:` without a host.
    #[error("the URL has no host")]
    NoHost,
    /// A `#fragment`, which HTTP never sends: a token put there would be lost.
    #[error("the URL has a #fragment, which is never sent")]
    Fragment,
}

impl Endpoint {
    /// Parses and checks `raw`; the error never quotes it.
    pub fn parse(raw: &str) -> Result<Endpoint, EndpointError> {
        let url = reqwest::Url::parse(raw.trim())
            .map_err(|e| EndpointError::NotAbsolute(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(EndpointError::Scheme);
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(EndpointError::NoHost);
        }
        if url.fragment().is_some() {
            return Err(EndpointError::Fragment);
        }
        Ok(Endpoint(url))
    }

    /// The full URL, credentials included: for the request only.
    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.0
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.0;
        write!(f, "{}://{}", u.scheme(), u.host_str().unwrap_or_default())?;
        if let Some(port) = u.port() {
            write!(f, ":{port}")?;
        }
        let more = u.path() != "/" || u.query().is_some() || !u.username().is_empty();
        if more {
            f.write_str("/…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({self})")
    }
}

/// clap's parser for `--events-webhook`: a refused value is reported with the reason only
/// (clap's own message would quote the value, credentials and all). Exit code 2 as for any
/// bad flag.
#[derive(Clone, Copy, Debug, Default)]
pub struct EndpointParser;

impl clap::builder::TypedValueParser for EndpointParser {
    type Value = Endpoint;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Endpoint, clap::Error> {
        let refuse = |why: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid --events-webhook (or OPM_EVENTS_WEBHOOK): {why}; the value is \
                     not shown since it may carry credentials\n"
                ),
            )
            .with_cmd(cmd)
        };
        let raw = value
            .to_str()
            .ok_or_else(|| refuse("not valid UTF-8".into()))?;
        Endpoint::parse(raw).map_err(|e| refuse(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_no_credentials_path_or_query() {
        for (raw, shown) in [
            ("https://hooks.example.com/", "https://hooks.example.com"),
            (
                "https://user:s3cret@hooks.example.com/",
                "https://hooks.example.com/…",
            ),
            (
                "http://127.0.0.1:8080/services/T0/B0/s3cret",
                "http://127.0.0.1:8080/…",
            ),
            ("https://h.example/in?token=s3cret", "https://h.example/…"),
        ] {
            let e = Endpoint::parse(raw).expect(raw);
            assert_eq!(e.to_string(), shown);
            assert!(!format!("{e:?}").contains("s3cret"));
            assert_eq!(e.url().as_str().contains("s3cret"), raw.contains("s3cret"));
        }
    }

    #[test]
    fn refuses_other_schemes_and_never_quotes_the_value() {
        for (raw, want) in [
            ("ftp://user:s3cret@h.example/", EndpointError::Scheme),
            ("s3cret:user@h.example", EndpointError::Scheme),
            (
                "s3cret",
                EndpointError::NotAbsolute("relative URL without a base".into()),
            ),
            ("https://h.example/#s3cret", EndpointError::Fragment),
            ("file:///etc/s3cret", EndpointError::Scheme),
        ] {
            let e = Endpoint::parse(raw).expect_err(raw);
            assert_eq!(e, want, "{raw}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn a_refused_flag_exits_2_without_the_value() {
        use clap::builder::TypedValueParser;
        let cmd = clap::Command::new("run");
        let e = EndpointParser
            .parse_ref(&cmd, None, std::ffi::OsStr::new("gopher://u:s3cret@h/"))
            .expect_err("refused");
        assert_eq!(e.exit_code(), 2);
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("--events-webhook"), "{e}");
    }
}
