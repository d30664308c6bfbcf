//! A panic inside one attempt fails only that attempt: it is logged and retried with
//! backoff, and the process and the other attempts go on.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use opm_core::ReleaseKey;

use crate::controller::driver::DriverError;

/// Runs an attempt's future; a panic inside it becomes [`DriverError::Panicked`] (logged,
/// then retried with backoff by the controller's error policy) instead of unwinding through
/// the controller and ending the process.
pub(super) async fn contain_panics<T>(
    key: &ReleaseKey,
    attempt: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    AssertUnwindSafe(attempt)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic_message(panic.as_ref());
            tracing::error!(
                kind = key.kind.as_str(),
                namespace = %key.namespace,
                name = %key.name,
                panic = %message,
                "the attempt panicked; it is retried with backoff"
            );
            Err(DriverError::Panicked(message))
        })
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key() -> ReleaseKey {
        ReleaseKey {
            kind: opm_core::Kind::Release,
            namespace: "a".into(),
            name: "r".into(),
        }
    }

    #[tokio::test]
    async fn a_panicking_attempt_fails_alone() {
        let got = contain_panics::<()>(&key(), async {
            // What `Duration::mul_f64` did with a 5124095576030431h interval.
            let _ = Duration::from_secs(u64::MAX).mul_f64(1.05);
            Ok(())
        })
        .await;
        match got {
            Err(DriverError::Panicked(m)) => assert!(m.contains("too big"), "{m}"),
            other => panic!("{other:?}"),
        }
        // The next attempt on the same task runs normally.
        assert!(contain_panics(&key(), async { Ok(1) }).await.is_ok());
    }
}
