//! `cue` exits 1 on every failure, so this is the one place where its stderr is read and
//! classified; everything downstream matches on [`RenderError`] variants.

use super::RenderError;

/// Lines of `cue`'s stderr kept in an error message: the first ones name the field.
pub(super) const MESSAGE_LINES: usize = 12;

/// Classifies a failed `cue` run by its stderr. Message texts are pinned by tests against the
/// real binary, so an upgrade that changes them fails loudly.
///
/// Every message is redacted, whatever its class (SPEC §23): an evaluation error quotes
/// values, and a value may be a secret; the class is read from words anywhere in stderr,
/// and an evaluation error that also mentions "i/o timeout" or "module not found" (a
/// module's own message, or a value holding those words) must not skip redaction by
/// landing in another class. Module paths and registry addresses stay readable where
/// `cue` prints them unquoted, which it does in every fetch error.
pub fn classify_stderr(stderr: &str) -> RenderError {
    let message = crate::cue::redact::cue_message(&first_lines(stderr));
    if stderr.contains("cannot fetch") && crate::cue::registry_auth::says_refused(stderr) {
        // 401/403 on a module pull: not an evaluation error, and not transient.
        RenderError::Resolution {
            message: format!(
                "the registry refused the module pull (no or wrong credentials; see spec.module.secretRef): {message}"
            ),
        }
    } else if is_registry_unreachable(stderr) {
        RenderError::RegistryUnreachable { message }
    } else if RESOLUTION.iter().any(|p| stderr.contains(p)) {
        RenderError::Resolution { message }
    } else {
        RenderError::Evaluation { message }
    }
}

/// The registry could not be asked, or answered with a server-side error: both may pass.
fn is_registry_unreachable(stderr: &str) -> bool {
    const NETWORK: [&str; 4] = [
        "cannot do HTTP request",
        "connection refused",
        "no such host",
        "i/o timeout",
    ];
    const SERVER: [&str; 5] = [
        "429 Too Many Requests",
        "500 Internal Server Error",
        "502 Bad Gateway",
        "503 Service Unavailable",
        "504 Gateway Timeout",
    ];
    NETWORK.iter().any(|p| stderr.contains(p))
        || (stderr.contains("cannot fetch") && SERVER.iter().any(|p| stderr.contains(p)))
}

/// A module, version or package that does not exist, or a module file that can never resolve.
const RESOLUTION: [&str; 4] = [
    "module not found",
    "cannot find module providing package",
    "invalid module file",
    "mismatched major version",
];

/// The first [`MESSAGE_LINES`] non-empty lines of `s`.
pub(super) fn first_lines(s: &str) -> String {
    let lines: Vec<&str> = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(MESSAGE_LINES)
        .collect();
    let msg = lines.join("\n");
    if msg.is_empty() {
        "cue failed without a message".to_owned()
    } else {
        msg
    }
}
