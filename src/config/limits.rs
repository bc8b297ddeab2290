//! `[limits]`: what no member, bot or model can push richbot past. The key names are a
//! contract (admins' files and docs use them); 0 turns a token budget off.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Turns per room: a bucket of this size, refilled at this rate per minute.
    pub turns_per_room_per_minute: u32,
    /// Turns per asker, likewise.
    pub turns_per_user_per_minute: u32,
    /// After a bucket trips, the room (or sender) is not answered for this long.
    pub loop_cooldown_secs: u64,
    /// LLM tokens per asker per rolling day (0: no limit).
    pub tokens_per_user_per_day: u64,
    /// LLM tokens per room per rolling day (0: no limit).
    pub tokens_per_room_per_day: u64,
    /// LLM tokens for the whole deployment per rolling day (0: no limit).
    pub tokens_per_day: u64,
    /// Tool calls run per model reply; the rest are refused.
    pub tool_calls_per_round: u32,
    /// Sends and edits made by tool calls in one turn.
    pub writes_per_turn: u32,
    /// A whole turn (model calls, waits for edit slots, retries) ends by then.
    pub turn_deadline_secs: u64,
    /// Users exempt from per-user limits: ids or patterns with `*`.
    pub exempt: Vec<String>,
    /// Tools offered per MCP server at most (the rest are not, and named in the log).
    pub mcp_tools_per_server: usize,
    /// Rooms the personas join on one member's invites at most; more are declined, saying so.
    pub rooms_per_inviter: u64,
    /// Rooms the personas are in at most, in all.
    pub rooms_total: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            turns_per_room_per_minute: 8,
            turns_per_user_per_minute: 12,
            loop_cooldown_secs: 300,
            tokens_per_user_per_day: 200_000,
            tokens_per_room_per_day: 1_000_000,
            tokens_per_day: 5_000_000,
            tool_calls_per_round: 8,
            writes_per_turn: 20,
            turn_deadline_secs: 300,
            exempt: Vec::new(),
            mcp_tools_per_server: 64,
            rooms_per_inviter: 20,
            rooms_total: 5_000,
        }
    }
}

/// `[budget]`: how the token budgets of `[limits]` count a model call, and the audio budget.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// What a prompt token the provider reused from its cache counts for, against a fresh
    /// one's 1 (hosted APIs bill them at a fraction; a local server spends little on them).
    pub cached_token_weight: f64,
    /// Seconds of voice messages transcribed per asker per rolling day (0: no limit).
    pub audio_seconds_per_day: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self { cached_token_weight: 1.0, audio_seconds_per_day: 1800 }
    }
}

impl Limits {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        for (key, value) in [
            ("turns_per_room_per_minute", u64::from(self.turns_per_room_per_minute)),
            ("turns_per_user_per_minute", u64::from(self.turns_per_user_per_minute)),
            ("tool_calls_per_round", u64::from(self.tool_calls_per_round)),
            ("writes_per_turn", u64::from(self.writes_per_turn)),
            ("turn_deadline_secs", self.turn_deadline_secs),
            ("mcp_tools_per_server", self.mcp_tools_per_server as u64),
            ("rooms_per_inviter", self.rooms_per_inviter),
            ("rooms_total", self.rooms_total),
        ] {
            if value == 0 {
                problems.push(format!("limits.{key}: must be at least 1"));
            }
        }
    }
}

impl BudgetConfig {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        let weight = self.cached_token_weight;
        if !(0.0..=1.0).contains(&weight) {
            problems.push(format!(
                "budget.cached_token_weight: must be from 0 to 1 (a cached token costs at most a fresh one), not {weight}"
            ));
        }
    }
}
