//! The one task that POSTs the queue: asks the outbox what to do, does it, reports the
//! answer. It decides nothing itself (the core's `Outbox` does).

use std::sync::{Arc, Weak};
use std::time::Duration;

use opm_core::event_delivery::{Answer, Poll};
use tokio::sync::Notify;

use super::{Endpoint, Payload, Shared, WebhookConfig, cloudevent};

pub(super) struct Sender {
    client: reqwest::Client,
    endpoint: Endpoint,
    shared: Weak<Shared>,
    wake: Arc<Notify>,
    /// The last tries failed (logged once per outage, not per try).
    failing: bool,
    /// The receiver refused events for good (logged once until it takes one).
    rejecting: bool,
}

impl Sender {
    pub(super) fn new(
        config: &WebhookConfig,
        shared: Weak<Shared>,
        wake: Arc<Notify>,
    ) -> Result<Self, reqwest::Error> {
        // Same crypto provider as the Kubernetes client (reqwest has none of its own).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.request_timeout)
            // A redirect would re-send the event (and its credentials) elsewhere: refused,
            // it counts as a rejection.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("opm-operator/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            endpoint: config.endpoint.clone(),
            shared,
            wake,
            failing: false,
            rejecting: false,
        })
    }

    pub(super) async fn run(mut self) {
        loop {
            let next = match self.shared.upgrade() {
                Some(shared) => shared.lock().poll(jiff::Timestamp::now()),
                None => return,
            };
            match next {
                Poll::Send { seq, item } => {
                    let (answer, status) = self.post(&item).await;
                    self.log(answer, status);
                    let Some(shared) = self.shared.upgrade() else {
                        return;
                    };
                    let _ = shared
                        .lock()
                        .handle_answer(seq, jiff::Timestamp::now(), answer);
                }
                Poll::WaitUntil(at) => {
                    let wait = jiff::Timestamp::now().duration_until(at);
                    let wait = Duration::try_from(wait).unwrap_or_default();
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        // Only the webhook's end can matter here (new events queue behind).
                        () = self.wake.notified() => {}
                    }
                }
                // `Busy` cannot happen with one sender; wait for a wake-up like `Idle`.
                Poll::Busy | Poll::Idle => self.wake.notified().await,
            }
        }
    }

    /// POSTs one CloudEvent; the answer as the core reads it, and the HTTP status if any.
    async fn post(&self, body: &Payload) -> (Answer, Option<u16>) {
        let sent = self
            .client
            .post(self.endpoint.url().clone())
            .header(reqwest::header::CONTENT_TYPE, cloudevent::CONTENT_TYPE)
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let status = resp.status().as_u16();
                (Answer::of_status(Some(status), retry_after), Some(status))
            }
            Err(e) => {
                // reqwest's message quotes the URL: never logged with it.
                tracing::debug!(receiver = %self.endpoint, error = %e.without_url(), "events webhook POST failed");
                (Answer::of_status(None, None), None)
            }
        }
    }

    /// Logs changes only (failing, refusing, taking events again): a receiver that is down
    /// or refuses everything costs a line, not a line per event.
    fn log(&mut self, answer: Answer, status: Option<u16>) {
        let status = status.map_or_else(|| "no answer".to_string(), |s| format!("HTTP {s}"));
        match answer {
            Answer::Retry { .. } if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    receiver = %self.endpoint,
                    answer = %status,
                    "events webhook: the receiver is not taking events; retrying with backoff"
                );
            }
            Answer::Rejected if !self.rejecting => {
                self.rejecting = true;
                tracing::warn!(
                    receiver = %self.endpoint,
                    answer = %status,
                    "events webhook: the receiver refused an event for good; dropping what it \
                     refuses (opm_controller_events_webhook_dropped_total{{reason=\"rejected\"}})"
                );
            }
            Answer::Delivered if self.failing || self.rejecting => {
                (self.failing, self.rejecting) = (false, false);
                tracing::info!(receiver = %self.endpoint, "events webhook: the receiver takes events again");
            }
            _ => {}
        }
    }
}
