//! The only module that talks to the LLM: async-openai against any OpenAI-compatible base
//! URL, with a per-call timeout (async-openai sets none) and its bounded built-in retries
//! on 429, 5xx and connection errors. Requests and responses go through `byot` as JSON so
//! that servers with non-standard fields (`finish_reason: "eos"`, missing `created`) work.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use serde_json::Value;

use super::{Complete, Message, Reply, ToolSpec, wire};

/// The LLM could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("LLM request failed: {0}")]
    Api(String),
    #[error("LLM answered without a usable message")]
    Empty,
}

/// The chat client. `Debug` leaves the key out.
#[derive(Clone)]
pub struct Llm {
    client: Client<OpenAIConfig>,
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: u32,
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
        let base_url = base_url.trim_end_matches('/').to_owned();
        let config = OpenAIConfig::new().with_api_base(&base_url).with_api_key(api_key.unwrap_or(""));
        Self {
            client: Client::build(http.clone(), config),
            http,
            base_url,
            api_key: api_key.map(str::to_owned),
            model: model.to_owned(),
            max_tokens,
        }
    }

    /// `GET {base}/models`: is the endpoint there and does it accept the key?
    pub async fn reachable(&self) -> Result<(), Error> {
        let mut req = self.http.get(format!("{}/models", self.base_url));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = req.send().await.map_err(|e| Error::Api(e.to_string()))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(Error::Api(format!("GET {}/models answered {}", self.base_url, response.status())))
        }
    }
}

impl Complete for Llm {
    async fn complete(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Reply, Error> {
        let request = wire::request(&self.model, self.max_tokens, messages, tools);
        let response: Value = self.client.chat().create_byot(request).await.map_err(|e| Error::Api(e.to_string()))?;
        wire::reply(&response).ok_or(Error::Empty)
    }
}
