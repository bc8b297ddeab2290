//! The retry policy for homeserver calls: 429 honours `retry_after_ms` / `Retry-After`,
//! 5xx and connection errors back off exponentially, other 4xx are permanent. Bounded in
//! attempts, so nothing is retried forever.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use super::Error;

/// How often and how long to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, including the first.
    pub attempts: u32,
    /// First back-off; doubles per attempt.
    pub base: Duration,
    /// Longest single wait (also caps a server's `retry_after_ms`).
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { attempts: 6, base: Duration::from_millis(250), max_wait: Duration::from_secs(30) }
    }
}

enum Outcome {
    Done(Value),
    Retry { wait: Option<Duration>, why: String },
    Fail(Error),
}

impl RetryPolicy {
    pub(super) async fn run<F, Fut>(&self, attempt: F) -> Result<Value, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = reqwest::Result<reqwest::Response>>,
    {
        let mut last = String::new();
        for n in 0..self.attempts {
            match classify(attempt().await).await {
                Outcome::Done(v) => return Ok(v),
                Outcome::Fail(e) => return Err(e),
                Outcome::Retry { wait, why } => {
                    last = why;
                    if n + 1 == self.attempts {
                        break;
                    }
                    let backoff = self.base.saturating_mul(2u32.saturating_pow(n));
                    let wait = wait.unwrap_or(backoff).min(self.max_wait);
                    tracing::debug!(attempt = n + 1, ?wait, reason = %last, "homeserver call failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
        Err(Error::Unavailable(last))
    }
}

async fn classify(result: reqwest::Result<reqwest::Response>) -> Outcome {
    let response = match result {
        Ok(r) => r,
        Err(e) => return Outcome::Retry { wait: None, why: format!("request failed: {e}") },
    };
    let status = response.status();
    let header_wait = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = response.text().await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() {
        return Outcome::Done(if body.is_null() { Value::Object(Default::default()) } else { body });
    }
    let errcode = body.get("errcode").and_then(Value::as_str).unwrap_or("M_UNKNOWN").to_owned();
    let error = body.get("error").and_then(Value::as_str).unwrap_or("").to_owned();
    if status.as_u16() == 429 {
        let wait = body.get("retry_after_ms").and_then(Value::as_u64).map(Duration::from_millis).or(header_wait);
        return Outcome::Retry { wait, why: format!("rate limited ({errcode})") };
    }
    if status.is_server_error() {
        return Outcome::Retry { wait: None, why: format!("{status} {errcode}: {error}") };
    }
    Outcome::Fail(Error::Refused { status: status.as_u16(), errcode, error })
}
