//! Whether a streamed answer's server is still there, told by its bytes rather than its
//! events. A model server on a CPU can take a minute to read a long prompt before the
//! first event; llama.cpp (and vLLM, LiteLLM, others) keep the stream open meanwhile with
//! SSE comments (`:` lines, "pings"), which the event-stream reader under async-openai
//! drops. So the streamed call's body is watched below it: every chunk of bytes, a ping
//! included, is a sign of life ([`Alive`]), and `stream::read` times out on silence, not
//! on a missing event. A server that says nothing at all is still cut at
//! `llm.timeout_secs`; one that pings while it reads is waited for (the turn's deadline
//! still bounds the whole turn).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_openai::error::OpenAIError;
use futures::StreamExt;
use tokio::time::Instant;
use tower::{Layer, Service};

/// When the server last sent anything for one call.
#[derive(Debug, Clone)]
pub struct Alive(Arc<Mutex<Instant>>);

impl Alive {
    /// Starts counting now (the request is about to be sent).
    pub fn new() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }

    /// Something arrived.
    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// When something last arrived (or the call started).
    pub fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for Alive {
    fn default() -> Self {
        Self::new()
    }
}

/// The layer that watches responses' bytes for one call.
#[derive(Clone)]
pub struct Watch(pub Alive);

impl<S> Layer<S> for Watch {
    type Service = Watched<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Watched { inner, alive: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct Watched<S> {
    inner: S,
    alive: Alive,
}

type Answer = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send>>;

impl<S, R> Service<R> for Watched<S>
where
    S: Service<R, Response = reqwest::Response, Error = OpenAIError>,
    S::Future: Send + 'static,
{
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let answer = self.inner.call(request);
        let alive = self.alive.clone();
        Box::pin(async move {
            let response = answer.await?;
            alive.touch();
            Ok(watched(response, alive))
        })
    }
}

/// `response` with each chunk of its body touching `alive` as it arrives.
fn watched(response: reqwest::Response, alive: Alive) -> reqwest::Response {
    let mut head = http::Response::new(());
    *head.status_mut() = response.status();
    *head.version_mut() = response.version();
    *head.headers_mut() = response.headers().clone();
    let body = response.bytes_stream().map(move |chunk| {
        alive.touch();
        chunk
    });
    let (parts, ()) = head.into_parts();
    reqwest::Response::from(http::Response::from_parts(parts, reqwest::Body::wrap_stream(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_touch_moves_the_last_sign_of_life() {
        let alive = Alive::new();
        let started = alive.last();
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert_eq!(alive.last(), started);
        alive.clone().touch();
        assert_eq!(alive.last() - started, std::time::Duration::from_secs(5));
    }
}
