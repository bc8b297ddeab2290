//! One listing of a server's tools (at connect, and on `notifications/tools/list_changed`):
//! which are offered, under which names (`names`), within the [`Bounds`] (so many tools,
//! so large a schema; the rest are not offered, and named in the log and `check`).
//!
//! The listing is checked against the config: an `approval`, `no_approval` or
//! `concurrent` entry that names no listed tool is a problem (a typo there, or a
//! differently cased name, would let the tool run unasked), which stops a start. The
//! tools of the listing at start are the ones the admin vouched for; a tool first listed
//! later (added, or renamed through `list_changed`, or of a server that was down at start)
//! always needs the asker's approval, until a start lists it.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::Peer;
use serde_json::Value;

use super::names;
use super::server::{Listed, MIN_CONNECT, Peers};

/// How much of a listing is offered.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Tools per server (`limits.mcp_tools_per_server`); the rest are not offered.
    pub tools: usize,
    /// Bytes of one tool's input schema, as JSON; a larger one is not offered.
    pub schema_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self { tools: 64, schema_bytes: 8 * 1024 }
    }
}

/// Lists server `i`'s tools and offers those whose names pass (`names::admit`), within
/// the bounds; `at_start`: this listing says which tools the admin vouched for.
pub(super) async fn list(all: &Peers, i: usize, peer: &Peer<RoleClient>, at_start: bool) {
    let server = &all.servers[i];
    let name = server.config.name.as_str();
    let timeout = Duration::from_secs(server.config.timeout_secs).max(MIN_CONNECT);
    let tools = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            return server.update(|s| s.down = Some(format!("MCP server {name}: listing its tools failed: {e}")));
        }
        Err(_) => {
            return server.update(|s| s.down = Some(format!("MCP server {name}: tools/list took over {timeout:?}")));
        }
    };
    let mut taken: Vec<(String, String)> = all.reserved.iter().map(|n| (n.clone(), "richbot".to_owned())).collect();
    for other in all.servers.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, s)| s) {
        for t in other.tools() {
            taken.push((names::exposed(&other.config.name, &t.tool), format!("MCP server {}", other.config.name)));
        }
    }
    let (ok, mut problems) = names::admit(name, tools.iter().map(|t| t.name.as_ref()), &mut taken);
    let mut dropped = Vec::new();
    let mut listed: Vec<Listed> = Vec::new();
    for t in tools.iter().filter(|t| ok.contains(&t.name.as_ref())) {
        let schema = Value::Object((*t.input_schema).clone());
        let size = schema.to_string().len();
        if listed.len() >= all.bounds.tools {
            dropped.push(format!(
                "MCP server {name}: tool \"{}\" is over the {} tools offered per server (limits.mcp_tools_per_server)",
                t.name, all.bounds.tools
            ));
        } else if size > all.bounds.schema_bytes {
            dropped.push(format!(
                "MCP server {name}: tool \"{}\" has a {size}-byte input schema, over {} bytes",
                t.name, all.bounds.schema_bytes
            ));
        } else {
            // Offered in the subset every common model server takes (one keyword it
            // cannot turn into a grammar fails every request); the server still checks
            // its arguments.
            let (schema, removed) = crate::agent::portable::portable(&schema);
            if !removed.is_empty() {
                tracing::warn!(
                    server = name,
                    tool = %t.name,
                    removed = removed.join("; "),
                    "offered without what some model servers cannot take in its input schema"
                );
            }
            listed.push(Listed {
                tool: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                schema,
                late: false,
            });
        }
    }
    let all_names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for (key, tool) in server.config.listed_names() {
        if !all_names.contains(&tool) {
            problems.push(format!(
                "MCP server {name}: {key} names \"{tool}\", which the server does not list (it lists {})",
                all_names.iter().take(20).map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for p in &problems {
        tracing::error!(server = name, "{p}");
    }
    for d in &dropped {
        tracing::warn!(server = name, "{d}; the tool is not offered");
    }
    server.update(|s| {
        if at_start {
            s.vouched = Some(listed.iter().map(|t| t.tool.clone()).collect());
        }
        for t in &mut listed {
            t.late = s.vouched.as_ref().is_none_or(|v| !v.contains(&t.tool));
            if t.late {
                tracing::warn!(server = name, tool = %t.tool, "a tool first listed after start needs the asker's approval until a restart lists it");
            }
        }
        tracing::info!(server = name, tools = listed.len(), "MCP tools listed");
        s.peer = Some(peer.clone());
        s.down = None;
        s.tools = listed;
        s.problems = problems;
        s.dropped = dropped;
    });
}
