//! Pictures and endpoints that cannot take them: a request with image parts that the
//! endpoint refuses (400 or 422) is made again with the pictures named instead, and the
//! endpoint is not sent pictures from then on, as one that refuses streaming is asked
//! without it. The turn asks [`Llm::sees`] to tell the member, once, that it cannot see.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use super::llm::Llm;
use super::{Complete, Error, Fill, LiveText, Message, Reply, ToolSpec};

impl Complete for Llm {
    async fn complete(&self, messages: &[Message], tools: &[ToolSpec], live: &LiveText) -> Result<Reply, Error> {
        let reply = self.complete_seeing(messages, tools, live).await?;
        if !self.text_tool_calls {
            return Ok(reply);
        }
        let round = messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
        Ok(super::written::recover(reply, tools, u32::try_from(round).unwrap_or(u32::MAX)))
    }

    async fn fill(&self, messages: &[Message], fill: &Fill) -> Result<Option<Reply>, Error> {
        self.fill_in(messages, fill).await
    }
}

impl Llm {
    /// Whether the model is sent pictures (not after its endpoint refused some).
    pub fn sees(&self) -> bool {
        self.vision.load(Ordering::Relaxed)
    }

    /// A call, with the pictures while the endpoint takes them.
    async fn complete_seeing(&self, messages: &[Message], tools: &[ToolSpec], live: &LiveText) -> Result<Reply, Error> {
        let pictures = messages.iter().any(|m| matches!(m, Message::UserImages { .. }));
        if !pictures {
            return self.complete_once(messages, tools, live).await;
        }
        let sent: Cow<'_, [Message]> = if self.sees() { Cow::Borrowed(messages) } else { Cow::Owned(named(messages)) };
        match self.complete_once(&sent, tools, live).await {
            Err(Error::Refused(status @ (400 | 422), why)) if self.sees() => {
                tracing::warn!(
                    status,
                    why,
                    "the LLM endpoint refused a request with pictures; naming them from now on"
                );
                self.vision.store(false, Ordering::Relaxed);
                self.complete_once(&named(messages), tools, live).await
            }
            answer => answer,
        }
    }
}

/// `messages` with each picture named in its text instead of sent.
pub(super) fn named(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|m| match m {
            Message::UserImages { text, .. } => {
                Message::User(format!("{text} (not shown to you: you cannot see pictures)"))
            }
            other => other.clone(),
        })
        .collect()
}
