//! Polling for eventually-true conditions (a controller under test converges on its own
//! schedule; tests wait for the state, never sleep a fixed time).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How often [`eventually`] polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls `check` every [`POLL_INTERVAL`] until it returns `Some`, or fails with
/// [`Error::Timeout`] naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn returns_the_first_some() {
        let calls = AtomicU32::new(0);
        let got = eventually("third call", Duration::from_secs(5), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            (n == 3).then_some(n)
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
    }

    #[tokio::test]
    async fn times_out_with_the_name() {
        let err = eventually("never", Duration::from_millis(250), || async { None::<()> })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("never"), "{err}");
    }
}
