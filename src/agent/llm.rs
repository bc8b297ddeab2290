//! The only module that talks to the LLM: async-openai against any OpenAI-compatible base
//! URL, with its built-in retries (3) on 429, 5xx and connection errors. Those retries
//! wait as long as a `Retry-After` header asks, without a cap, so a whole call is bounded
//! here: [`ATTEMPTS`] attempts of at most the timeout each, plus at most
//! [`MAX_RETRY_WAIT`] of waiting in all. A server that asks for longer fails the call,
//! which the turn reports. Requests and responses go through `byot` as JSON so that
//! servers with non-standard fields (`finish_reason: "eos"`, missing `created`) work.
//!
//! Timeouts: an unstreamed call's attempt is bounded by `llm.timeout_secs` whole. A
//! streamed call is bounded by it only up to its first event (connecting, the prompt
//! read); after that, by `llm.idle_timeout_secs` between events, so a long answer that
//! keeps coming is never cut by the clock, and a stalled one is (`stream::read`).
//!
//! A chat request answered 401, 403 or 404 is a mistake in the configuration (the key,
//! the URL, the model), reported as [`Error::Refused`] whether the call streamed or not.
//! So is a 400 or 422 about the request itself (a tool schema the server cannot turn into
//! a grammar, an unknown model, a prompt past its context): the same request would be
//! refused again. A 400 or 422 to a streamed request (or a body that is no event stream)
//! that the same request unstreamed does not get means the endpoint cannot stream, which
//! is remembered. So is a 400 or 422 about `logprobs` (asked for with every answer,
//! `odds.rs`): the request is made again asking llama.cpp's way (`n_probs`), or without,
//! and so are all later ones.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use serde_json::Value;

use tower::Layer;

use super::alive::{Alive, Watch};
use super::errors::{cannot_stream, failed};
pub use super::probe::Probe;
use super::{LiveText, Message, Reply, ToolSpec, wire};

/// The LLM could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("LLM request failed: {0}")]
    Api(String),
    /// The endpoint refused the request for its configuration: HTTP 401, 403 or 404, or
    /// 400 or 422 about the request itself (its tools, its model), with its message.
    #[error("LLM request refused ({0}): {1}")]
    Refused(u16, String),
    /// No answer in time; the endpoint may have read (and billed) the prompt.
    #[error("LLM request timed out: {0}")]
    TimedOut(String),
    #[error("LLM answered without a usable message")]
    Empty,
    /// The caller's metering did not allow the call (a budget is spent, or it could not
    /// be checked); the reason is the caller's to report.
    #[error("the call was not made: {0}")]
    NotAllowed(String),
    /// The turn cannot go on now (a write could not be made, a record not kept); it is
    /// resumed later from what was recorded.
    #[error("suspended: {0}")]
    Suspended(String),
    /// A streamed answer stopped part-way: the text so far, and why.
    #[error("the answer stopped part-way: {1}")]
    Cut(String, String),
    /// The model server could not read the tool call the model wrote (its words); made a
    /// cut call by [`Llm`], never retried as an outage.
    #[error("the model server could not read the model's tool call: {0}")]
    Unreadable(String),
}

/// Attempts async-openai makes at one call: the first and its three retries.
pub const ATTEMPTS: u32 = 4;
/// The retries of [`ATTEMPTS`].
const RETRIES: usize = (ATTEMPTS - 1) as usize;
/// Most time a call may spend waiting between its attempts.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// Most silence between two events of a streamed answer unless configured
/// (`llm.idle_timeout_secs`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls in flight at once unless configured (`llm.max_concurrent_requests`).
pub const DEFAULT_CONCURRENCY: usize = 1024;

/// The chat client. `Debug` leaves the key out.
#[derive(Clone)]
pub struct Llm {
    /// For unstreamed calls: each attempt bounded by the timeout.
    client: Client<OpenAIConfig>,
    /// For streamed calls (a client each, [`Self::streaming_client`]): no bound on the
    /// whole, which `stream::read` bounds by silence.
    streaming: reqwest::Client,
    config: OpenAIConfig,
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: u32,
    /// The most one call (its attempts and the waits between them) may take; for a
    /// streamed call, up to its first event.
    call_limit: Duration,
    /// `llm.timeout_secs`: a streamed answer's first event comes within it.
    timeout: Duration,
    /// Most silence between a streamed answer's events.
    idle: Duration,
    /// Whether to ask for streamed answers: configured, and turned off for good when the
    /// endpoint refuses a streamed request.
    stream: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether the model is sent pictures: until the endpoint refuses a request with some.
    pub(super) vision: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Calls in flight at once (`llm.max_concurrent_requests`), shared by every clone.
    pub(super) calls: std::sync::Arc<tokio::sync::Semaphore>,
    /// Calls the model writes as text are read as calls (`llm.text_tool_calls`).
    pub(super) text_tool_calls: bool,
    /// Whether the endpoint is asked for structured output (`fill.rs`): until it refuses.
    pub(super) structured: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How answers are asked for their tokens' log-probabilities (`odds.rs`), as the
    /// endpoint takes them.
    odds: std::sync::Arc<super::odds::Asking>,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm").field("base_url", &self.base_url).field("model", &self.model).finish_non_exhaustive()
    }
}

impl Llm {
    pub fn new(base_url: &str, api_key: Option<&str>, model: &str, timeout: Duration, max_tokens: u32) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("a reqwest client with static settings builds");
        let streaming = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10).min(timeout))
            .build()
            .expect("a reqwest client with static settings builds");
        let base_url = base_url.trim_end_matches('/').to_owned();
        let config = OpenAIConfig::new().with_api_base(&base_url).with_api_key(api_key.unwrap_or(""));
        Self {
            client: Client::build(http.clone(), config.clone())
                .with_http_service(super::transport::stack(http.clone(), RETRIES)),
            streaming,
            config,
            http,
            base_url,
            api_key: api_key.map(str::to_owned),
            model: model.to_owned(),
            max_tokens,
            call_limit: timeout.saturating_mul(ATTEMPTS) + MAX_RETRY_WAIT.min(timeout),
            timeout,
            idle: DEFAULT_IDLE_TIMEOUT,
            stream: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            vision: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            calls: std::sync::Arc::new(tokio::sync::Semaphore::new(DEFAULT_CONCURRENCY)),
            text_tool_calls: true,
            structured: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            odds: std::sync::Arc::default(),
        }
    }

    /// Reads calls the model writes as text as calls (`llm.text_tool_calls`, on by
    /// default), or leaves its text as it is.
    pub fn with_text_tool_calls(mut self, on: bool) -> Self {
        self.text_tool_calls = on;
        self
    }

    /// At most `n` calls in flight at once; the others wait their turn, in order.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.calls = std::sync::Arc::new(tokio::sync::Semaphore::new(n.max(1)));
        self
    }

    /// Counts its calls against `other`'s limit of calls in flight (one limit for every
    /// endpoint: `llm.max_concurrent_requests`).
    pub fn sharing_limit_with(mut self, other: &Llm) -> Self {
        self.calls = other.calls.clone();
        self
    }

    /// Most silence between a streamed answer's events (`llm.idle_timeout_secs`).
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// Asks for streamed answers (`llm.stream`), until the endpoint refuses one.
    pub fn with_streaming(self, on: bool) -> Self {
        self.stream.store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// `GET {base}/models`: is the endpoint there, does it take the key, and which models
    /// does it list (empty when it lists none)?
    pub async fn probe(&self) -> Result<Vec<String>, Probe> {
        let mut req = self.http.get(format!("{}/models", self.base_url));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = req.send().await.map_err(|e| Probe::Unreachable(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(Probe::Status(status.as_u16()));
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let ids = body
            .get("data")
            .and_then(Value::as_array)
            .map(|d| d.iter().filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned)).collect());
        Ok(ids.unwrap_or_default())
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    pub fn has_key(&self) -> bool {
        self.api_key.as_deref().is_some_and(|k| !k.is_empty())
    }
}

impl Llm {
    async fn whole(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Reply, Error> {
        self.whole_request(self.body(messages, tools, false)).await
    }

    /// The request for an answer: with its tokens' log-probabilities asked for, while
    /// the endpoint takes that.
    fn body(&self, messages: &[Message], tools: &[ToolSpec], stream: bool) -> Value {
        let mut body = wire::request(&self.model, self.max_tokens, messages, tools, stream);
        self.odds.ask(&mut body);
        body
    }

    /// One unstreamed call of `request`, bounded as a whole.
    pub(super) async fn whole_request(&self, request: Value) -> Result<Reply, Error> {
        let chat = self.client.chat();
        let call = chat.create_byot(request);
        let response: Value = match tokio::time::timeout(self.call_limit, call).await {
            Ok(answer) => answer.map_err(failed)?,
            Err(_) => return Err(self.too_long()),
        };
        wire::reply(&response).ok_or(Error::Empty)
    }

    fn too_long(&self) -> Error {
        Error::TimedOut(format!(
            "no answer within {} s (attempts and the waits the server asked for)",
            self.call_limit.as_secs()
        ))
    }
}

impl Llm {
    /// One call as asked (`vision.rs` decides about pictures first). A tool call the
    /// server could not read comes back as a reply with that call cut.
    pub(super) async fn complete_once(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        live: &LiveText,
    ) -> Result<Reply, Error> {
        let mut answer = self.asked(messages, tools, live).await;
        // Refused for the odds: asked again the next way (at most twice, then without).
        while let Err(Error::Refused(status @ (400 | 422), why)) = &answer
            && self.odds.refused(why)
        {
            tracing::warn!(status, why, "the LLM endpoint refused log-probabilities as asked; asking another way");
            answer = self.asked(messages, tools, live).await;
        }
        match answer {
            Err(Error::Unreadable(why)) => {
                tracing::warn!(base_url = %self.base_url, why, "the model server could not read the model's tool call; asking the model for a shorter one");
                Ok(Reply::unreadable())
            }
            answer => answer,
        }
    }

    /// A client for one streamed call, whose response's bytes touch `alive` (`alive.rs`):
    /// the retries as for any call, watched above them.
    fn streaming_client(&self, alive: &Alive) -> Client<OpenAIConfig> {
        let stack = Watch(alive.clone()).layer(super::transport::stack(self.streaming.clone(), RETRIES));
        Client::build(self.streaming.clone(), self.config.clone()).with_http_service(stack)
    }

    async fn asked(&self, messages: &[Message], tools: &[ToolSpec], live: &LiveText) -> Result<Reply, Error> {
        use std::sync::atomic::Ordering;
        live.send_replace(String::new());
        let _slot = self.calls.acquire().await.map_err(|_| Error::Api("the LLM client is closed".to_owned()))?;
        if !self.stream.load(Ordering::Relaxed) {
            return self.whole(messages, tools).await;
        }
        let request = self.body(messages, tools, true);
        let alive = Alive::new();
        let client = self.streaming_client(&alive);
        let chat = client.chat();
        let opened = match tokio::time::timeout(self.call_limit, chat.create_stream_byot::<Value, Value>(request)).await
        {
            Ok(opened) => opened,
            Err(_) => return Err(self.too_long()),
        };
        match opened {
            Ok(events) => {
                let pace = super::stream::Pace { first: self.timeout, idle: self.idle };
                super::stream::read(events, live, pace, &alive, self.text_tool_calls.then_some(tools)).await
            }
            // An endpoint that refuses to stream (a 400 about it, a body that is no event
            // stream) is remembered and asked without streaming from now on; one that
            // refuses the same request unstreamed too refused the request, not streaming.
            Err(e) if cannot_stream(&e) => match self.whole(messages, tools).await {
                Err(refused @ Error::Refused(400 | 422, _)) => Err(refused),
                answer => {
                    tracing::warn!(error = %e, "the LLM endpoint refused a streamed request; answering without streaming");
                    self.stream.store(false, Ordering::Relaxed);
                    answer
                }
            },
            Err(e) => Err(failed(e)),
        }
    }
}
