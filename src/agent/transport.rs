//! The HTTP stack under async-openai: its own retries (429, 5xx and connection errors,
//! [`OpenAIRetryLayer`]) over reqwest, with one exception below them. A 500 whose body
//! says the model server could not parse the tool call the model wrote (llama.cpp:
//! "Failed to parse tool call arguments as JSON", or "The model produced output that does
//! not match the expected … format") is not an outage: asking again makes
//! the model write the same long call again (minutes on a CPU) to fail the same way. It
//! goes back at once as an error the retries pass through, for the loop to treat as a
//! cut call ([`super::Error::Unreadable`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError};
use async_openai::middleware::retry::OpenAIRetryLayer;
use async_openai::middleware::{HttpRequestFactory, ReqwestService};
use tower::{Layer, Service};

/// The `type` the error of an unreadable call is given (read back by `errors.rs`).
pub const UNREADABLE_TYPE: &str = "richbot_unreadable_tool_call";

/// Whether an error message from the model server says it could not read a tool call.
pub fn unreadable_call(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("failed to parse tool call")
        || m.contains("failed to parse tool-call")
        || m.contains("model produced output that does not match")
}

/// Async-openai's retries over reqwest, with unreadable calls not retried.
pub fn stack(
    http: reqwest::Client,
    retries: usize,
) -> impl Service<HttpRequestFactory, Response = reqwest::Response, Error = OpenAIError, Future = impl Send + 'static>
+ Clone
+ Send
+ Sync
+ 'static {
    OpenAIRetryLayer::new(retries).layer(NotRetried { inner: ReqwestService::new(http) })
}

#[derive(Clone)]
struct NotRetried<S> {
    inner: S,
}

type Answer = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl<S> Service<HttpRequestFactory> for NotRetried<S>
where
    S: Service<HttpRequestFactory, Response = reqwest::Response, Error = OpenAIError>,
    S::Future: Send + 'static,
{
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            if response.status() != reqwest::StatusCode::INTERNAL_SERVER_ERROR {
                return Ok(response);
            }
            let (status, headers) = (response.status(), response.headers().clone());
            let body = response.bytes().await.map_err(OpenAIError::Reqwest)?;
            let message = error_message(&body);
            if unreadable_call(&message) {
                let api_error = ApiError { message, r#type: Some(UNREADABLE_TYPE.to_owned()), ..ApiError::default() };
                return Err(OpenAIError::ApiError(ApiErrorResponse { status_code: status, api_error }));
            }
            // Any other 500: as it came, for the retries.
            let mut again = http::Response::new(body);
            *again.status_mut() = status;
            *again.headers_mut() = headers;
            Ok(reqwest::Response::from(again))
        })
    }
}

/// The message of an error body: `error.message` as OpenAI and llama.cpp write it, or
/// the body as text.
fn error_message(body: &[u8]) -> String {
    let parsed = serde_json::from_slice::<serde_json::Value>(body).ok();
    let message = parsed.as_ref().and_then(|v| v.pointer("/error/message")).and_then(serde_json::Value::as_str);
    message.map_or_else(|| String::from_utf8_lossy(body).into_owned(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpps_unreadable_call_is_told_apart_from_other_server_errors() {
        let body = br#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] syntax error","type":"server_error"}}"#;
        assert!(unreadable_call(&error_message(body)));
        // Its newer parser's words for the same, as a real server streamed them here.
        let peg = br#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format: <tool_call>"}}"#;
        assert!(unreadable_call(&error_message(peg)));
        assert!(!unreadable_call(&error_message(br#"{"error":{"code":500,"message":"slot unavailable"}}"#)));
        assert_eq!(error_message(b"upstream down"), "upstream down");
    }
}
