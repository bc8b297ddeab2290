//! The channel's MCP server (streamable HTTP, stateless, JSON answers): `rich_send` and
//! `rich_edit` with the specs, descriptions and `plan()` the model gets (`room` is a room
//! id, an alias, or `@user:server` for a direct message), `send` in the host-channel
//! shape, `replies`, and `schedule` / `schedules` / `unschedule` (messages later:
//! `schedules`). Every writing tool takes an optional `idempotency_key`. A
//! refusal is the same failure object as over HTTP, as an `isError` result.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::{Channel, Client, Failure, parse};
use crate::tools::{RICH_EDIT, RICH_SEND, SCHEDULE, SCHEDULES, UNSCHEDULE, tool_specs};

/// The host-channel tool and the one that reads answers back.
const SEND: &str = "send";
const REPLIES: &str = "replies";

/// The MCP service for `/mcp` (the client comes in the request's extensions).
pub fn service(channel: Arc<Channel>) -> StreamableHttpService<Handler, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // Every request carries a client's token: a rebound host name gets nowhere.
        .disable_allowed_hosts();
    let handler = Handler { channel };
    StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), config)
}

/// Answers one client's MCP requests.
#[derive(Debug, Clone)]
pub struct Handler {
    channel: Arc<Channel>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("richbot", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "richbot delivers messages to Matrix rooms and people as a persona: rich_send / rich_edit for \
                 rich messages (blocks plus a fallback), send for plain text, replies to read people's answers.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools(self.channel.outbox.interval_ms())))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let client = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Arc<Client>>())
            .cloned()
            .ok_or_else(|| ErrorData::invalid_request("no client: send a client's bearer token", None))?;
        let args = Value::Object(request.arguments.unwrap_or_default());
        let ch = &self.channel;
        let result = match request.name.as_ref() {
            RICH_SEND => match parse::rich_send(&args) {
                Ok((req, key)) => ch.send(client, req, key).await.map(to_value),
                Err(f) => Err(f),
            },
            RICH_EDIT => match parse::rich_edit(&args) {
                Ok((req, key)) => ch.edit(client, req, key).await.map(to_value),
                Err(f) => Err(f),
            },
            SEND => match parse::send(&args, false) {
                Ok((req, key)) => ch.send(client, req, key).await.map(to_value),
                Err(f) => Err(f),
            },
            REPLIES => replies(ch, &client, &args).await,
            SCHEDULE => ch.schedule(&client, &args).await,
            SCHEDULES => ch.schedules(&client).await,
            UNSCHEDULE => match parse::schedule_id(&args) {
                Ok(id) => ch.unschedule(&client, id).await,
                Err(f) => Err(f),
            },
            other => Err(Failure::new(
                400,
                "unknown_tool",
                format!(
                    "no tool `{}` (tools: {RICH_SEND}, {RICH_EDIT}, {SEND}, {REPLIES}, {SCHEDULE}, {SCHEDULES}, \
                     {UNSCHEDULE})",
                    crate::blocks::cut(other, 40)
                ),
            )),
        };
        Ok(match result {
            Ok(v) => CallToolResult::structured(v),
            Err(f) => CallToolResult::structured_error(f.to_value()),
        }
        .into())
    }
}

fn to_value(receipt: super::Receipt) -> Value {
    serde_json::to_value(receipt).unwrap_or(Value::Null)
}

async fn replies(channel: &Channel, client: &Client, args: &Value) -> Result<Value, Failure> {
    let id = args.get("message_id").and_then(Value::as_str).unwrap_or_default();
    let message = ruma::EventId::parse(id.trim())
        .map_err(|_| Failure::invalid("message_id", "message_id must be the message_id a send returned (\"$...\")"))?;
    channel.replies(client, &message, args.get("since").and_then(Value::as_str)).await
}

/// The tools as offered: the model's rich tools with `room` for agents and a key.
fn tools(edit_interval_ms: u64) -> Vec<Tool> {
    let key = json!({"type": "string", "description": "Optional. The same key again (within agents.idempotency_hours) returns the first call's receipt and posts nothing."});
    let mut out = Vec::new();
    for spec in tool_specs(edit_interval_ms) {
        let mut schema = spec.parameters;
        schema["properties"]["idempotency_key"] = key.clone();
        if spec.name == RICH_SEND {
            schema["properties"]["room"] = json!({"type": "string", "description": "Where to post: a room id (!...) or alias (#...) the persona is in, or @user:server for a direct message."});
            schema["required"] = json!(["payload", "fallback", "room"]);
        } else if let Some(props) = schema["properties"].as_object_mut() {
            props.remove("room");
        }
        let description = spec.description.replace(
            "Returns {\"event_id\": \"$...\"}",
            "Returns {\"message_id\", \"room_id\", \"event_id\", \"deduplicated\"}",
        );
        out.push(tool(spec.name, description, schema));
    }
    out.push(tool(
        SEND.to_owned(),
        "Deliver a plain CommonMark message: kind \"channel\" to a room (to: a room id or alias), or \"direct\" to a person \
         (to: @user:server; their direct chat is opened the first time). Returns {\"message_id\", \"room_id\", \"deduplicated\"}."
            .to_owned(),
        json!({"type": "object", "properties": {
            "channel": {"type": "string", "enum": ["matrix"]},
            "kind": {"type": "string", "enum": ["direct", "channel"]},
            "to": {"type": "string", "description": "A room id or alias (channel), or a user id (direct)."},
            "body": {"type": "string", "description": "The message, CommonMark."},
            "idempotency_key": key,
        }, "required": ["kind", "to", "body"], "additionalProperties": false}),
    ));
    out.push(tool(
        REPLIES.to_owned(),
        "The replies, thread messages and reactions (with their senders) to a message you sent, after `since` (the `next` \
         of your previous read; leave it out the first time). Call again with `next` to wait for more."
            .to_owned(),
        json!({"type": "object", "properties": {
            "message_id": {"type": "string", "description": "The message_id a send returned."},
            "since": {"type": "string", "description": "The `next` of the previous read."},
        }, "required": ["message_id"], "additionalProperties": false}),
    ));
    out.extend(schedule_tools(&key));
    out
}

/// `schedule`, `schedules` and `unschedule` for agents: the model's, with `kind` and `to`
/// as `send` has them, messages only, and a key.
fn schedule_tools(key: &Value) -> Vec<Tool> {
    let mut out = Vec::new();
    for spec in crate::schedules::schedule_specs() {
        let mut schema = spec.parameters;
        let description;
        if spec.name == SCHEDULE {
            if let Some(props) = schema["properties"].as_object_mut() {
                props.remove("prompt");
                props.remove("room");
                props.insert("kind".into(), json!({"type": "string", "enum": ["direct", "channel"]}));
                props.insert(
                    "to".into(),
                    json!({"type": "string", "description": "A room id or alias (channel), or a user id (direct)."}),
                );
                props.insert("idempotency_key".into(), key.clone());
            }
            schema["required"] = json!(["kind", "to", "message"]);
            description =
                "Post a message later: once (at, RFC 3339 with offset) or repeatedly (every, an RFC 5545 RRULE \
                 in the zone tz), to a room (kind channel) or a person (kind direct). message is text or {payload, \
                 fallback} as for rich_send. Returns the schedule with its id and next times."
                    .to_owned();
        } else if spec.name == SCHEDULES {
            schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
            description = "List the schedules you made, with ids and next times.".to_owned();
        } else {
            description = "Cancel a schedule you made.".to_owned();
        }
        out.push(tool(spec.name, description, schema));
    }
    out
}

fn tool(name: String, description: String, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    Tool::new_with_raw(name, Some(Cow::Owned(description)), Arc::new(schema))
}
