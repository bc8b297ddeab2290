//! One `[[mcp]]` entry of the config file, as read (checked by the config module). The key
//! names are a contract: admins' files and docs use them.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One `[[mcp]]` entry, as read.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// Its tools are offered as `<name>__<tool>`.
    pub name: String,
    /// A stdio server: the command richbot starts (and restarts), with `args` and `env`.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The only environment the command gets besides `PATH`, `HOME` and `LANG`: richbot's
    /// own (its LLM key among it) is not passed on.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A streamable-HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// Tools (as the server names them) that run only once the asker allows them.
    #[serde(default)]
    pub approval: Vec<String>,
    /// Tools safe to run alongside other calls of the same reply.
    #[serde(default)]
    pub concurrent: Vec<String>,
    /// Per tool call.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// No answer from the asker by then is a denial.
    #[serde(default = "default_approval_timeout")]
    pub approval_timeout_secs: u64,
    /// Who may have these tools used for them (patterns with `*`); empty: everyone who
    /// may talk to the persona.
    #[serde(default)]
    pub users: Vec<String>,
    /// In which rooms (ids, or patterns with `*`); empty: every room.
    #[serde(default)]
    pub rooms: Vec<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("url", &self.url)
            .field("approval", &self.approval)
            .field("concurrent", &self.concurrent)
            .finish_non_exhaustive()
    }
}

fn default_timeout() -> u64 {
    30
}
fn default_approval_timeout() -> u64 {
    120
}
