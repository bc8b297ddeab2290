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
    let mut error = body.get("error").and_then(Value::as_str).unwrap_or("").to_owned();
    // The appservice ping reports our own answer's status (`M_BAD_STATUS`) in `status`.
    if let Some(inner) = body.get("status").and_then(Value::as_u64) {
        error.push_str(&format!(" (status {inner})"));
    }
    if status.as_u16() == 429 {
        let wait = body.get("retry_after_ms").and_then(Value::as_u64).map(Duration::from_millis).or(header_wait);
        return Outcome::Retry { wait, why: format!("rate limited ({errcode})") };
    }
    // The appservice ping reports richbot's own failure to answer with these, as a 502 or
    // 504: the homeserver is fine, retrying will not change the answer.
    let about_us = matches!(errcode.as_str(), "M_BAD_STATUS" | "M_CONNECTION_FAILED" | "M_CONNECTION_TIMEOUT");
    if status.is_server_error() && !about_us {
        return Outcome::Retry { wait: None, why: format!("{status} {errcode}: {error}") };
    }
    Outcome::Fail(Error::Refused { status: status.as_u16(), errcode, error })
}

#[cfg(test)]
mod tests {
    //! The waits themselves, on paused time: answers are made in memory (no socket), so
    //! the clock can be paused and every wait measured exactly.
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use tokio::time::Instant;

    use super::*;

    fn answer(status: u16, body: &str, retry_after: Option<&str>) -> reqwest::Response {
        let mut response = http::Response::builder().status(status);
        if let Some(secs) = retry_after {
            response = response.header("retry-after", secs);
        }
        reqwest::Response::from(response.body(body.to_owned()).expect("a response"))
    }

    /// Runs `policy` over scripted answers; returns the result and when each attempt began.
    async fn run(policy: RetryPolicy, script: Vec<reqwest::Response>) -> (Result<Value, Error>, Vec<Duration>) {
        let start = Instant::now();
        let script = Mutex::new(VecDeque::from(script));
        let at = Mutex::new(Vec::new());
        let result = policy
            .run(|| {
                at.lock().expect("lock").push(start.elapsed());
                let next = script.lock().expect("lock").pop_front();
                async move { Ok(next.unwrap_or_else(|| answer(500, "{}", None))) }
            })
            .await;
        (result, at.into_inner().expect("lock"))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_waits_as_long_as_asked_and_a_server_error_backs_off() {
        let policy = RetryPolicy { attempts: 4, base: ms(5), max_wait: ms(300) };
        let script = vec![
            answer(429, r#"{"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 150}"#, None),
            answer(502, "", None),
            answer(200, r#"{"event_id": "$landed"}"#, None),
        ];
        let (result, at) = run(policy, script).await;
        assert_eq!(result.expect("landed")["event_id"], "$landed");
        // 150 ms as the server asked, then the second back-off step (5 ms doubled).
        assert_eq!(at, [ms(0), ms(150), ms(160)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_header_is_honoured_up_to_the_cap() {
        let policy = RetryPolicy { attempts: 4, base: ms(5), max_wait: ms(300) };
        let script = vec![answer(429, r#"{"errcode": "M_LIMIT_EXCEEDED"}"#, Some("30")), answer(200, "{}", None)];
        let (result, at) = run(policy, script).await;
        assert!(result.is_ok());
        assert_eq!(at, [ms(0), ms(300)], "30 s asked, capped at 300 ms");
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_are_bounded_and_back_off_doubles() {
        let policy = RetryPolicy { attempts: 4, base: ms(10), max_wait: ms(25) };
        let (result, at) = run(policy, Vec::new()).await;
        assert!(matches!(result, Err(Error::Unavailable(_))));
        assert_eq!(at, [ms(0), ms(10), ms(30), ms(55)], "10, 20, then capped at 25");
    }
}
