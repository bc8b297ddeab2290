//! What probing an LLM endpoint (`GET /models`, or a chat request's refusal) found wrong,
//! told apart from an outage and explained to the admin with the fix.

/// What probing the endpoint found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// No HTTP answer (refused, timed out, DNS).
    Unreachable(String),
    /// An HTTP answer with this error status.
    Status(u16),
    /// A chat request was answered with this error status (401, 403, 404).
    Chat(u16),
    /// A chat request was refused for what it asked (400, 422), with the endpoint's words.
    Request(u16, String),
}

impl Probe {
    /// Whether this is a mistake in the configuration (the key, the URL), not an outage.
    pub fn is_config_error(&self) -> bool {
        matches!(self, Probe::Status(401 | 403 | 404) | Probe::Chat(401 | 403 | 404) | Probe::Request(..))
    }

    /// What is wrong and what to do, for an admin.
    pub fn explain(&self, base_url: &str, has_key: bool) -> String {
        match self {
            Probe::Unreachable(e) => {
                format!("{base_url} is unreachable ({e}); is llm.base_url right and the server up?")
            }
            Probe::Status(404) => format!("{base_url}/models answered 404: does llm.base_url end in /v1?"),
            Probe::Chat(404) => format!(
                "{base_url}/chat/completions answered 404: does llm.base_url end in /v1, and does the endpoint offer llm.model?"
            ),
            Probe::Status(401 | 403) | Probe::Chat(401 | 403) if !has_key => format!(
                "{base_url} wants an API key and none is set: set llm.api_key, llm.api_key_file or OPENAI_API_KEY"
            ),
            Probe::Status(s @ (401 | 403)) | Probe::Chat(s @ (401 | 403)) => {
                format!("{base_url} refused the API key ({s}): check llm.api_key, llm.api_key_file or OPENAI_API_KEY")
            }
            Probe::Request(s, message) => format!(
                "{base_url}/chat/completions refused the request (HTTP {s}: {message}): the model (llm.model) or \
                 the tools' schemas are not what this endpoint takes; `richbot check --model` shows which"
            ),
            Probe::Status(s) => format!("{base_url}/models answered {s}"),
            Probe::Chat(s) => format!("{base_url}/chat/completions answered {s}"),
        }
    }
}
