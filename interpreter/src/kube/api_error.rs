//! The one place where Kubernetes client failures become the core's typed [`ApiError`]:
//! the core classifies by variant (SPEC §4), so every executor funnels its errors here.

use opm_core::ApiError;

/// Maps a kube client error to its class by HTTP status (connection failures are
/// `Unavailable`, a status-less failure is `Other { code: 0 }`).
pub fn from_kube(err: &kube::Error) -> ApiError {
    match err {
        kube::Error::Api(status) => match from_status(status.code, &status.message) {
            // kube does not surface the `Retry-After` header, but the API server repeats it
            // in the Status body as `details.retryAfterSeconds`.
            ApiError::TooManyRequests { message, .. } => ApiError::TooManyRequests {
                message,
                retry_after_secs: status
                    .details
                    .as_ref()
                    .map(|d| u64::from(d.retry_after_seconds))
                    .filter(|s| *s > 0),
            },
            other => other,
        },
        kube::Error::HyperError(e) => ApiError::Unavailable {
            message: e.to_string(),
        },
        kube::Error::Service(e) => {
            let message = e.to_string();
            if message.contains("timed out") || message.contains("deadline") {
                ApiError::Timeout { message }
            } else {
                ApiError::Unavailable { message }
            }
        }
        other => ApiError::Other {
            code: 0,
            message: other.to_string(),
        },
    }
}

/// Maps an HTTP status and the server's message to its class.
pub fn from_status(code: u16, message: &str) -> ApiError {
    let message = message.to_string();
    match code {
        403 => ApiError::Forbidden { message },
        404 => ApiError::NotFound { message },
        409 => ApiError::Conflict { message },
        422 => ApiError::Invalid { message },
        429 => ApiError::TooManyRequests {
            message,
            retry_after_secs: None,
        },
        408 | 504 => ApiError::Timeout { message },
        500..=599 => ApiError::Unavailable { message },
        code => ApiError::Other { code, message },
    }
}

/// True when the error is a 404 from the server.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_their_class() {
        assert!(matches!(from_status(403, "x"), ApiError::Forbidden { .. }));
        assert!(matches!(from_status(404, "x"), ApiError::NotFound { .. }));
        assert!(matches!(from_status(409, "x"), ApiError::Conflict { .. }));
        assert!(matches!(from_status(422, "x"), ApiError::Invalid { .. }));
        assert!(matches!(
            from_status(429, "x"),
            ApiError::TooManyRequests { .. }
        ));
        assert!(matches!(
            from_status(503, "x"),
            ApiError::Unavailable { .. }
        ));
        assert!(matches!(from_status(504, "x"), ApiError::Timeout { .. }));
        assert_eq!(
            from_status(418, "teapot"),
            ApiError::Other {
                code: 418,
                message: "teapot".into()
            }
        );
    }
}
