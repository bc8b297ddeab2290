//! The agent: one bounded tool loop per turn over an OpenAI-compatible chat API.
//!
//! Lifecycle: send the conversation with the tools -> if the model calls tools, run each
//! through the [`ToolRunner`] (which plans, authorizes and posts) and append the results
//! -> ask again -> until the model answers with text or `max_rounds` is reached. Calls
//! the model wrote as text are read as calls where the reply is read (`written`); an
//! answer the caller's review sends back ([`Reply::correction`]) is followed by the
//! correction and the model is asked again, within the same rounds. A tool
//! failure is a tool result the model can act on, never an error of the loop; the loop
//! ends with an error only when the LLM fails for good (after its bounded retries), or
//! when a runner suspends it (the write cannot be made now; the turn resumes later).

mod alive;
mod errors;
mod fill;
mod guard;
mod llm;
mod odds;
pub mod portable;
mod probe;
mod stream;
mod transport;
mod vision;
mod wire;
pub mod written;

pub use fill::Fill;
pub use guard::Misbehaved;
pub use llm::{Error, Llm, Probe};
pub use odds::Odds;

use guard::Seen;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool as offered to the model (the OpenAI function-tool shape). The agent owns this
/// type: what the tools are is the caller's business (`tools::tool_specs`), and the LLM
/// client needs only their names, descriptions and schemas.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One message of the conversation (domain type; `wire.rs` maps it to the API).
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    /// A member's message with pictures: its text, and each picture as a `data:` URL.
    UserImages {
        text: String,
        images: Vec<String>,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        content: String,
    },
}

/// What a picture is counted as, in characters of the request, for the token estimate
/// (a scaled picture costs a vision model about a thousand to fifteen hundred tokens).
pub const IMAGE_CHARS: usize = 6_000;

impl Message {
    /// Characters of the message, for the token estimate and the history budget.
    pub fn chars(&self) -> usize {
        match self {
            Message::System(t) | Message::User(t) => t.len(),
            Message::UserImages { text, images } => text.len() + images.len() * IMAGE_CHARS,
            Message::Assistant { text, tool_calls } => {
                text.as_deref().map_or(0, str::len) + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        }
    }
}

/// A tool call as the model made it; `arguments` is JSON text (maybe broken).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// The reply reached its token limit while this call was being written
    /// (`finish_reason: "length"`): its arguments may end early, so it is never run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self { id: id.into(), name: name.into(), arguments: arguments.into(), cut: false }
    }

    /// What makes two calls the same: the tool and the arguments as a JSON value when they
    /// parse (so `{"a":1}` and `{"a": 1}` are one call; serde_json writes keys sorted), or
    /// as written. A cut call is like no other (`None`).
    pub fn identity(&self) -> Option<(&str, String)> {
        let args =
            serde_json::from_str::<Value>(&self.arguments).map_or_else(|_| self.arguments.clone(), |v| v.to_string());
        (!self.cut).then_some((self.name.as_str(), args))
    }
}

/// Token counts, summed over a turn. `cached` is the part of `prompt` the provider did not
/// evaluate again (reused from its cache of an earlier request's prefix).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    #[serde(default)]
    pub cached: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.prompt += other.prompt;
        self.completion += other.completion;
        self.cached += other.cached;
    }

    /// The prompt tokens the provider evaluated.
    pub fn fresh(&self) -> u64 {
        self.prompt.saturating_sub(self.cached)
    }
}

/// One model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// How many of `tool_calls` the model wrote as text (`written`), not made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub written: u32,
    /// The text is a call to an offered tool written as text that cannot be read: the
    /// model is to make the call instead, and the text is never posted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreadable_text: bool,
    /// It stopped at its token limit (`finish_reason: "length"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub length: bool,
    /// Its one call was filled in by the model when asked for its arguments (the answer
    /// promised what only that tool does, and made no call: `Complete::fill`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub filled: bool,
    /// How likely the model found its tokens, when the endpoint said (`odds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub odds: Option<Odds>,
    /// Set by the caller's review of a reply without calls (an answer a member may not
    /// read as it is): what the model is told before it is asked again. Not recorded: the
    /// review is made again of a replayed reply.
    #[serde(skip)]
    pub correction: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Reply {
    /// Word salad, by the model's own odds (`odds`): never shown, nor shown to the model
    /// again.
    pub fn babbled(&self) -> bool {
        self.odds.is_some_and(|o| o.babble())
    }

    /// A reply that stopped at its token limit (`finish_reason: "length"`): its last tool
    /// call is the one that was being written, and is marked cut.
    pub fn stopped_at_length(mut self, length: bool) -> Self {
        self.length = length;
        if length && let Some(last) = self.tool_calls.last_mut() {
            last.cut = true;
        }
        self
    }
}

/// The name given to a call the model server could not read (its 500 "Failed to parse
/// tool call arguments", or the same streamed): a cut call, never run.
pub const UNREADABLE_CALL: &str = "unreadable_call";

impl Reply {
    /// A reply whose one call the model server could not read: handled as a call cut off
    /// at the token limit (the model is asked once for a shorter call or a text answer).
    pub fn unreadable() -> Self {
        let mut call = ToolCall::new("call_unreadable", UNREADABLE_CALL, "");
        call.cut = true;
        Self { tool_calls: vec![call], ..Self::default() }
    }
}

/// How a loop ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The model's final text, if it ended with one.
    pub text: Option<String>,
    pub rounds: u32,
    pub usage: Usage,
    /// True when the loop stopped at `max_rounds` with the model still calling tools.
    pub exhausted: bool,
    /// Set when the loop ended early because the model misbehaved ([`guard`]).
    pub stopped: Option<Misbehaved>,
    /// A reply of the loop had a cut call (which the model was told of).
    pub cut: bool,
}

/// Why a runner stopped the loop: the call could not be made now (the homeserver is
/// down, the database failed), and the turn is to be resumed later, not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspend(pub String);

/// Runs one tool call and returns the tool result (JSON text) for the model, or suspends
/// the loop. `nth` numbers the turn's calls from 0, in the order the model made them
/// (the same when a resumed turn replays its record), whichever order they finish in.
pub trait ToolRunner {
    fn run(&self, call: &ToolCall, nth: u32) -> impl std::future::Future<Output = Result<String, Suspend>> + Send;

    /// Whether the tool is safe to run alongside others (see [`run_loop`]).
    fn concurrent(&self, name: &str) -> bool;

    /// The tool result for a call that was not run because the reply held more than
    /// `limit` calls.
    fn skipped(&self, call: &ToolCall, limit: usize) -> String;

    /// The tool result for a call not run because the model made it before in this turn.
    fn repeated(&self, call: &ToolCall) -> String;
}

/// How far one loop may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Model calls at most.
    pub max_rounds: u32,
    /// Tool calls run per model reply; the rest are answered with [`ToolRunner::skipped`].
    pub calls_per_round: usize,
}

/// The text of the reply being streamed, as it grows (reset at each model call): what the
/// turn shows live.
pub type LiveText = tokio::sync::watch::Sender<String>;

/// Anything that completes a conversation (the real client, or a test double). A streaming
/// one feeds `live` as the text arrives.
pub trait Complete {
    fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        live: &LiveText,
    ) -> impl std::future::Future<Output = Result<Reply, Error>> + Send;

    /// The arguments the model gives for `fill` after `messages`, held to its schema
    /// (`fill.rs`): a reply whose text is a JSON object (none if the model gave none), or
    /// `None` when this model cannot be asked so.
    fn fill(
        &self,
        _messages: &[Message],
        _fill: &Fill,
    ) -> impl std::future::Future<Output = Result<Option<Reply>, Error>> + Send {
        async { Ok(None) }
    }
}

/// The bounded tool loop. A reply's calls run one at a time, in order, unless every one
/// of them is `concurrent`: then they run together, and their results still go back in the
/// order the model made the calls.
pub async fn run_loop<L: Complete, R: ToolRunner + Sync>(
    llm: &L,
    mut messages: Vec<Message>,
    tools: &[ToolSpec],
    runner: &R,
    bounds: Bounds,
    live: &LiveText,
) -> (Result<Outcome, Error>, Vec<Message>) {
    let mut usage = Usage::default();
    let max_rounds = bounds.max_rounds;
    let mut calls_made = 0u32;
    let mut guard = guard::Guard::default();
    for round in 1..=max_rounds {
        let reply = match llm.complete(&messages, tools, live).await {
            Ok(r) => r,
            Err(e) => return (Err(e), messages),
        };
        usage.add(reply.usage);
        // Word salad sent back is not the model's to read again (it would copy it), nor is
        // an answer of nothing (an assistant turn with neither text nor calls is refused
        // by some endpoints).
        let unsaid = reply.tool_calls.is_empty() && reply.text.as_deref().is_none_or(|t| t.trim().is_empty());
        if !((reply.babbled() || unsaid) && reply.correction.is_some()) {
            messages.push(Message::Assistant { text: reply.text.clone(), tool_calls: reply.tool_calls.clone() });
        }
        // An answer the member may not read as it is: the model is told why and asked again
        // (a call written as text and cut at the token limit is a cut call, [`guard`]).
        if let Some(correction) = reply.correction.as_ref().filter(|_| reply.tool_calls.is_empty()) {
            guard.reply(&reply);
            if let Some(why) = guard.stop() {
                let (stopped, cut) = (Some(why.clone()), guard.was_cut());
                return (Ok(Outcome { text: None, rounds: round, usage, exhausted: false, stopped, cut }), messages);
            }
            messages.push(Message::User(correction.clone()));
            continue;
        }
        if reply.tool_calls.is_empty() {
            let cut = guard.was_cut();
            return (
                Ok(Outcome { text: reply.text, rounds: round, usage, exhausted: false, stopped: None, cut }),
                messages,
            );
        }
        let calls = &reply.tool_calls;
        // A call repeated in one reply (small models do) is made once: the repeats get
        // its result. The per-reply limit counts distinct calls.
        // Each call's arguments are read once, not once per pair (a reply may hold many).
        let mut seen: std::collections::HashMap<(&str, String), usize> = std::collections::HashMap::new();
        let first_of: Vec<usize> = (0..calls.len())
            .map(|i| match calls[i].identity() {
                Some(key) => *seen.entry(key).or_insert(i),
                None => i,
            })
            .collect();
        let now: Vec<usize> = (0..calls.len()).filter(|&i| first_of[i] == i).take(bounds.calls_per_round).collect();
        // A call made in an earlier round is not run again ([`guard`]).
        guard.reply(&reply);
        let (now, again): (Vec<usize>, Vec<usize>) =
            now.into_iter().partition(|&i| guard.call(&calls[i]) == Seen::First);
        let first = calls_made;
        calls_made += u32::try_from(calls.len()).unwrap_or(u32::MAX);
        let nth = |i: usize| first + u32::try_from(i).unwrap_or(u32::MAX);
        let results: Vec<Result<String, Suspend>> =
            if now.len() > 1 && now.iter().all(|&i| runner.concurrent(&calls[i].name)) {
                futures::future::join_all(now.iter().map(|&i| runner.run(&calls[i], nth(i)))).await
            } else {
                let mut results = Vec::with_capacity(now.len());
                for &i in &now {
                    let result = runner.run(&calls[i], nth(i)).await;
                    let stop = result.is_err();
                    results.push(result);
                    if stop {
                        break;
                    }
                }
                results
            };
        for (i, call) in calls.iter().enumerate() {
            let content = match now.iter().position(|&r| r == first_of[i]).map(|k| results.get(k)) {
                _ if again.contains(&first_of[i]) => runner.repeated(call),
                Some(Some(Ok(content))) => content.clone(),
                Some(Some(Err(Suspend(why)))) => return (Err(Error::Suspended(why.clone())), messages),
                // Not reached: an earlier call suspended the loop.
                Some(None) => break,
                None => runner.skipped(call, bounds.calls_per_round),
            };
            messages.push(Message::Tool { call_id: call.id.clone(), content });
        }
        if let Some(why) = guard.stop() {
            let (stopped, cut) = (Some(why.clone()), guard.was_cut());
            return (Ok(Outcome { text: None, rounds: round, usage, exhausted: false, stopped, cut }), messages);
        }
    }
    let cut = guard.was_cut();
    (Ok(Outcome { text: None, rounds: max_rounds, usage, exhausted: true, stopped: None, cut }), messages)
}
