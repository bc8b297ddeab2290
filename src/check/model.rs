//! `richbot check --model`: can each configured model use the rich tools? Each distinct
//! endpoint's model (a URL, key and model) is asked once, with the real system prompt of
//! the first persona that uses it and the tools as a turn offers them in a DM (the rich
//! tools and the persona's MCP tools, whose schemas the endpoint must take too), to
//! show the weather in Lisbon as a rich message; its call is checked by `plan`, as a
//! turn's would be. One call per model, so it is a flag, not part of the default check:
//! an admin choosing a model learns here, not from a member, that it answers in plain
//! text, or that the endpoint refuses the tools' schemas.

use std::time::Instant;

use ruma::{OwnedRoomId, OwnedUserId};

use super::Line;
use crate::agent::{self, Complete, Message};
use crate::config::Settings;
use crate::personas::Persona;
use crate::tools::registry::For;
use crate::tools::{self, RICH_SEND, Toolbox};
use crate::turn::context;

/// What the model is asked.
pub const QUESTION: &str = "Show the weather in Lisbon as a rich message.";

/// One line per distinct endpoint model.
pub async fn lines(settings: &Settings, personas: &[Persona], toolbox: &Toolbox) -> Vec<Line> {
    let mut asked: Vec<&crate::config::Endpoint> = Vec::new();
    let mut lines = Vec::new();
    for (persona, endpoint) in personas.iter().zip(&settings.endpoints) {
        if asked.contains(&endpoint) {
            continue;
        }
        asked.push(endpoint);
        let llm = agent::Llm::new(
            &endpoint.base_url,
            endpoint.api_key.as_deref(),
            &endpoint.model,
            settings.llm_timeout(),
            endpoint.max_tokens,
        );
        lines.push(ask(settings, persona, toolbox, &llm).await);
    }
    lines
}

async fn ask(settings: &Settings, persona: &Persona, toolbox: &Toolbox, llm: &agent::Llm) -> Line {
    let name = format!("model {}", llm.model());
    let server = &settings.config.homeserver.server_name;
    let scope = crate::turn::Scope {
        room: OwnedRoomId::try_from(format!("!richbot-check:{server}")).expect("a valid room id"),
        persona: persona.user_id.clone(),
        asker: OwnedUserId::try_from(format!("@admin:{server}")).expect("a valid user id"),
        is_dm: true,
        thread: None,
        reply_to: None,
    };
    let rich = [
        tools::tool_specs(settings.config.bot.edit_interval_ms),
        tools::poll_specs(),
        crate::schedules::schedule_specs(),
    ]
    .concat();
    let rich_count = rich.len();
    let who = For { servers: persona.tools.as_deref(), asker: &scope.asker, room: &scope.room };
    let offered = toolbox.offer(rich, who);
    let specs = offered.specs();
    let situation = context::Situation {
        scope: &scope,
        display_name: &persona.display_name,
        system_prompt: &persona.system_prompt,
        tools_line: tools::prompt_line(),
        gated: offered.gated(),
        polls: "",
        now_ms: crate::clock::now_ms(),
        zone: None,
        budget: settings.config.bot.history_chars,
        asked: &[],
        rooms: &tools::RoomChoices { in_dm: true, shared: Vec::new() },
    };
    let mut messages = context::build(&situation, &[], &[], &context::Parts::new());
    messages.push(Message::User(QUESTION.to_owned()));
    let mcp = match specs.len() - rich_count {
        0 => String::new(),
        n => format!(", with {n} MCP tool(s)"),
    };
    let (live, _) = tokio::sync::watch::channel(String::new());
    let started = Instant::now();
    let answer = llm.complete(&messages, &specs, &live).await;
    let took = format!("{:.1} s{mcp}", started.elapsed().as_secs_f64());
    let (ok, warn, detail) = match answer {
        Err(agent::Error::Refused(status @ (400 | 422), message)) => {
            (false, false, format!("the endpoint refused the tool schema (HTTP {status}: {message})"))
        }
        Err(e) => (false, false, e.to_string()),
        Ok(reply) if reply.tool_calls.iter().any(|c| c.name == agent::UNREADABLE_CALL) => (
            true,
            true,
            format!("the endpoint could not read the model's tool call ({took}); richbot asks the model once again"),
        ),
        Ok(reply) => match reply.tool_calls.iter().find(|c| c.name == RICH_SEND || c.cut) {
            Some(call) if call.cut => (
                true,
                true,
                format!(
                    "its {} call was cut off at the token limit (llm.max_tokens = {}) ({took}); raise it",
                    call.name,
                    llm.max_tokens()
                ),
            ),
            Some(call) => match checked(&call.arguments) {
                Ok(()) => (true, false, format!("rich_send call valid ({took})")),
                Err(e) => (
                    true,
                    true,
                    format!(
                        "its rich_send call does not pass the check ({e}) ({took}); richbot sends the error back \
                         for the model to fix, a round each time"
                    ),
                ),
            },
            None if !reply.tool_calls.is_empty() => {
                let called: Vec<&str> = reply.tool_calls.iter().map(|c| c.name.as_str()).collect();
                (true, true, format!("called {} instead of rich_send ({took})", called.join(", ")))
            }
            None => {
                let with = if mcp.is_empty() { String::new() } else { format!(" ({})", &mcp[2..]) };
                (true, true, format!("answered with text, no tool call{with}; richbot will post plain answers"))
            }
        },
    };
    Line { name, ok, warn, detail }
}

/// The call's arguments through `plan`, as a turn checks them.
fn checked(arguments: &str) -> Result<(), String> {
    let args: serde_json::Value =
        serde_json::from_str(arguments).map_err(|e| format!("arguments are not valid JSON: {e}"))?;
    tools::plan(RICH_SEND, &args).map(|_| ()).map_err(|e| format!("{}: {}", e.code, e.error))
}
