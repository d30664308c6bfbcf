//! Redirect policy and reqwest error reading: what a failed request was, in words.

use super::MAX_REDIRECTS;

/// Why a redirect was refused; carried through reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub(super) struct RefusedRedirect {
    pub(super) to: String,
    pub(super) why: &'static str,
}

/// Follows a redirect only to the scheme, host and port of the first request, at most
/// [`MAX_REDIRECTS`] times.
pub(super) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin = |u: &reqwest::Url| {
            (
                u.scheme().to_owned(),
                u.host_str().map(str::to_owned),
                u.port_or_known_default(),
            )
        };
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| origin(first) == origin(attempt.url()));
        let to = attempt.url().to_string();
        if !same {
            attempt.error(RefusedRedirect {
                to,
                why: "another origin",
            })
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(RefusedRedirect {
                to,
                why: "too many redirects",
            })
        } else {
            attempt.follow()
        }
    })
}

/// The first error of type `T` in `e`'s source chain.
pub(super) fn find_source<'e, T: std::error::Error + 'static>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e T> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(t);
        }
        cur = err.source();
    }
    None
}

/// reqwest's top-level message rarely says what went wrong; the sources do.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        cur = s.source();
    }
    msg
}
