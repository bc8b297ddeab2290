//! The tool registry: every tool a turn may offer, with where its calls go and the two
//! flags the loop and the runner obey: `needs_approval` (the asker is asked first) and
//! `concurrent` (safe to run alongside the other calls of a reply; default false).
//!
//! `rich_send`, `rich_edit`, `rich_poll` and `rich_poll_end` are entries like any other
//! (not approved, not concurrent: their writes are ordered and paced). MCP tools come from `crate::mcp`,
//! filtered per turn by who asks where: a persona offers the servers in its `tools`
//! (all by default), and a server's `users` and `rooms` patterns admit the asker and room.
//! A call to a name the turn was not offered is an unknown tool, whatever the server has.

use std::time::Duration;

use ruma::{RoomId, UserId};

use super::{RICH_EDIT, RICH_POLL, RICH_POLL_END, RICH_SEND, SCHEDULE, SCHEDULES, UNSCHEDULE};
use crate::agent::ToolSpec;
use crate::mcp::Mcp;
use regex::Regex;

/// The names the rich and schedule tools take, which no MCP tool may take.
pub const RESERVED: [&str; 7] = [RICH_SEND, RICH_EDIT, RICH_POLL, RICH_POLL_END, SCHEDULE, SCHEDULES, UNSCHEDULE];

/// Longest tool description offered (a server's own words, which cost prompt tokens).
const MAX_DESCRIPTION: usize = 1024;

/// Where a tool's calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The rich tools: planned, sandboxed and sent by the turn.
    Rich,
    /// A tool of MCP server number `server`, as the server names it.
    Mcp { server: usize, tool: String },
}

/// One tool offered to a turn.
#[derive(Debug, Clone)]
pub struct Tool {
    pub spec: ToolSpec,
    pub kind: Kind,
    pub needs_approval: bool,
    pub concurrent: bool,
    /// How long the asker has to allow a call (when `needs_approval`).
    pub approval_timeout: Duration,
}

/// Who may use one server's tools, compiled; an empty list admits everyone.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub users: Vec<Regex>,
    pub rooms: Vec<Regex>,
}

impl Access {
    pub fn admits(&self, user: &str, room: &str) -> bool {
        let any = |list: &[Regex], s: &str| list.is_empty() || list.iter().any(|re| re.is_match(s));
        any(&self.users, user) && any(&self.rooms, room)
    }
}

/// The tools one turn offers.
#[derive(Debug, Clone, Default)]
pub struct Offered {
    tools: Vec<Tool>,
}

impl Offered {
    /// What the model is told.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    /// Whether any of them runs only after the asker allows it.
    pub fn gated(&self) -> bool {
        self.tools.iter().any(|t| t.needs_approval)
    }
}

/// Every tool the deployment has. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Toolbox {
    mcp: Mcp,
    access: Vec<Access>,
}

/// Who a turn's tools are for.
#[derive(Debug, Clone, Copy)]
pub struct For<'a> {
    /// The persona's `tools` (server names), all when `None`.
    pub servers: Option<&'a [String]>,
    pub asker: &'a UserId,
    pub room: &'a RoomId,
}

impl Toolbox {
    /// `access[i]` is who may use server `i` of `mcp`.
    pub fn new(mcp: Mcp, access: Vec<Access>) -> Self {
        Self { mcp, access }
    }

    pub fn mcp(&self) -> &Mcp {
        &self.mcp
    }

    /// The rich tools (specs made for this turn) and the MCP tools `who` may use.
    pub fn offer(&self, rich: Vec<ToolSpec>, who: For<'_>) -> Offered {
        let mut tools: Vec<Tool> = rich
            .into_iter()
            .map(|spec| Tool {
                spec,
                kind: Kind::Rich,
                needs_approval: false,
                concurrent: false,
                approval_timeout: Duration::ZERO,
            })
            .collect();
        for (i, config, listed) in self.mcp.servers() {
            let offered = who.servers.is_none_or(|names| names.contains(&config.name));
            let admitted = self.access.get(i).is_none_or(|a| a.admits(who.asker.as_str(), who.room.as_str()));
            if !offered || !admitted {
                continue;
            }
            for t in listed {
                let needs_approval = config.gates(&t.tool) || t.late;
                let mut description = if needs_approval {
                    format!("(Runs only after the person asking allows it.) {}", t.description)
                } else {
                    t.description
                };
                if let Some((at, _)) = description.char_indices().nth(MAX_DESCRIPTION) {
                    description.truncate(at);
                }
                tools.push(Tool {
                    spec: ToolSpec {
                        name: crate::mcp::exposed(&config.name, &t.tool),
                        description,
                        parameters: t.schema,
                    },
                    concurrent: config.concurrent.contains(&t.tool),
                    needs_approval,
                    approval_timeout: Duration::from_secs(config.approval_timeout_secs),
                    kind: Kind::Mcp { server: i, tool: t.tool },
                });
            }
        }
        Offered { tools }
    }
}
