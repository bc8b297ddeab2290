//! One `[[mcp]]` entry of the config file, as read (checked by the config module). The key
//! names are a contract: admins' files and docs use them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

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
    /// HTTP headers sent to a `url` server with every request (`Authorization` for its
    /// token), so no secret has to ride in the URL. Values are secrets: never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// More headers, from a file of `Name: value` lines (merged into `headers` when the
    /// config is read).
    #[serde(default)]
    pub headers_file: Option<PathBuf>,
    /// Tools (as the server names them) that run only once the asker allows them; `"*"`
    /// (alone, or in the list) gates every tool, but those in `no_approval`.
    #[serde(default, deserialize_with = "one_or_many")]
    pub approval: Vec<String>,
    /// With `approval = "*"`: the tools that run without asking.
    #[serde(default)]
    pub no_approval: Vec<String>,
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
            .field("url", &self.url.as_deref().map(crate::url_mask::url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("approval", &self.approval)
            .field("concurrent", &self.concurrent)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Whether `approval` is `"*"`: every tool is gated but those in `no_approval`.
    pub fn gates_all(&self) -> bool {
        self.approval.iter().any(|a| a == "*")
    }

    /// Whether calls of `tool` (as the server names it) wait for the asker's approval.
    pub fn gates(&self, tool: &str) -> bool {
        if self.gates_all() {
            return !self.no_approval.iter().any(|t| t == tool);
        }
        self.approval.iter().any(|t| t == tool)
    }

    /// The tool names the config lists (`approval`, `no_approval`, `concurrent`), with
    /// the key that lists each: every one must name a tool the server offers.
    pub fn listed_names(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let approval = self.approval.iter().filter(|t| *t != "*").map(|t| ("approval", t.as_str()));
        let except = self.no_approval.iter().map(|t| ("no_approval", t.as_str()));
        approval.chain(except).chain(self.concurrent.iter().map(|t| ("concurrent", t.as_str())))
    }
}

/// A list of names, or one name (`"*"`) for a list of one.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

fn default_timeout() -> u64 {
    30
}
fn default_approval_timeout() -> u64 {
    120
}
