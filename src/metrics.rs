//! Counters for operators, in the Prometheus text format, served on their own address
//! (`[metrics] listen`), apart from the appservice port the homeserver talks to.
//!
//! Plain atomics and a few labelled maps: nothing here can block a request or fail.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The process's counters; shared as `Arc<Metrics>`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub transactions: AtomicU64,
    pub events_new: AtomicU64,
    pub events_duplicate: AtomicU64,
    pub events_malformed: AtomicU64,
    /// Questions not answered because they arrived too late (an outage).
    pub events_stale: AtomicU64,
    pub events_settled: AtomicU64,
    /// Events given up after every step on them failed.
    pub events_given_up: AtomicU64,
    pub llm_requests: AtomicU64,
    pub llm_failures: AtomicU64,
    /// Tool calls the model wrote as text, read as calls.
    pub llm_written_calls: AtomicU64,
    /// Calls an answer promised without making, filled in by the model when asked for
    /// their arguments (`turn::answer::keep`).
    pub llm_filled_calls: AtomicU64,
    /// Answers sent back to the model before a member read them (an unreadable written
    /// call, an empty answer, a promise no tool kept).
    pub answer_corrections: AtomicU64,
    pub prompt_tokens: AtomicU64,
    /// Of the prompt tokens, those the provider reused from its cache.
    pub cached_prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    pub edit_wait_ms: AtomicU64,
    /// Schedules' occurrences fired (of them, late), skipped (missed too long ago), and
    /// schedules stopped (their asker left or lost access).
    pub schedules_fired: AtomicU64,
    pub schedules_late: AtomicU64,
    pub schedules_skipped: AtomicU64,
    pub schedules_stopped: AtomicU64,
    /// Voice messages transcribed, and their seconds; refused (too long, too large, over
    /// the asker's day) or failed (the endpoint down or refusing); answers spoken.
    pub voice_transcribed: AtomicU64,
    pub voice_seconds: AtomicU64,
    pub voice_refused: AtomicU64,
    pub voice_failed: AtomicU64,
    pub voice_replies: AtomicU64,
    /// Active schedules, as last counted (a gauge).
    pub schedules_active: AtomicU64,
    turns: Mutex<BTreeMap<String, u64>>,
    tool_calls: Mutex<BTreeMap<(String, String), u64>>,
    /// Agent clients' writes by client and result.
    agent_writes: Mutex<BTreeMap<(String, String), u64>>,
    /// The personas' crypto's counters, when encryption is on.
    crypto: std::sync::OnceLock<std::sync::Arc<crate::crypto::Counters>>,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        add(counter, 1);
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        add(counter, n);
    }

    /// Counts what the personas' crypto does too.
    pub fn count_crypto(&self, counters: std::sync::Arc<crate::crypto::Counters>) {
        let _ = self.crypto.set(counters);
    }

    /// Counts a finished turn by its outcome kind (`answered`, `llm_failed`, ...).
    pub fn turn(&self, kind: &str) {
        let kind = kind.to_owned();
        if let Ok(mut map) = self.turns.lock() {
            *map.entry(kind).or_default() += 1;
        }
    }

    /// Counts a tool call by tool and result (`ok` or the error code).
    pub fn tool_call(&self, tool: &str, result: &str) {
        let tool = if matches!(tool, crate::tools::RICH_SEND | crate::tools::RICH_EDIT) { tool } else { "other" };
        if let Ok(mut map) = self.tool_calls.lock() {
            *map.entry((tool.to_owned(), result.to_owned())).or_default() += 1;
        }
    }

    /// Counts an agent client's write by client and result (`ok` or the error code).
    pub fn agent_write(&self, client: &str, result: &str) {
        if let Ok(mut map) = self.agent_writes.lock() {
            *map.entry((client.to_owned(), result.to_owned())).or_default() += 1;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64); 25] = [
            ("richbot_transactions_total", "Transactions received from the homeserver.", &self.transactions),
            ("richbot_events_stored_total", "Events stored for the first time.", &self.events_new),
            ("richbot_events_duplicate_total", "Events received again (retried transactions).", &self.events_duplicate),
            ("richbot_events_malformed_total", "Events skipped as malformed.", &self.events_malformed),
            ("richbot_events_stale_total", "Questions that arrived too late to answer.", &self.events_stale),
            (
                "richbot_events_settled_total",
                "Events settled at the door: in rooms no persona is in, nothing to handle.",
                &self.events_settled,
            ),
            (
                "richbot_events_given_up_total",
                "Events given up after every step on them failed (logged at WARN with the cause).",
                &self.events_given_up,
            ),
            ("richbot_llm_requests_total", "Chat completions requested.", &self.llm_requests),
            ("richbot_llm_failures_total", "Chat completions that failed for good.", &self.llm_failures),
            (
                "richbot_llm_written_calls_total",
                "Tool calls the model wrote as text, read as calls (llm.text_tool_calls).",
                &self.llm_written_calls,
            ),
            (
                "richbot_llm_filled_calls_total",
                "Tool calls an answer promised without making, filled in by the model when asked for their arguments.",
                &self.llm_filled_calls,
            ),
            (
                "richbot_answer_corrections_total",
                "Answers sent back to the model before a member read them: a call written as text that could not be \
                 read, an empty answer, or a promise no tool kept.",
                &self.answer_corrections,
            ),
            ("richbot_llm_prompt_tokens_total", "Prompt tokens reported by the LLM.", &self.prompt_tokens),
            (
                "richbot_llm_cached_prompt_tokens_total",
                "Of the prompt tokens, those the LLM reused from its cache (the rest were evaluated afresh).",
                &self.cached_prompt_tokens,
            ),
            ("richbot_llm_completion_tokens_total", "Completion tokens reported by the LLM.", &self.completion_tokens),
            ("richbot_edit_wait_milliseconds_total", "Time edits waited for their slot.", &self.edit_wait_ms),
            (
                "richbot_schedules_fired_total",
                "Schedule occurrences fired (late ones included).",
                &self.schedules_fired,
            ),
            (
                "richbot_schedules_late_total",
                "Schedule occurrences fired late (missed while richbot was down, within schedules.max_late_secs).",
                &self.schedules_late,
            ),
            (
                "richbot_schedules_skipped_total",
                "Schedule occurrences skipped: missed longer ago than schedules.max_late_secs.",
                &self.schedules_skipped,
            ),
            (
                "richbot_schedules_stopped_total",
                "Schedules stopped because their asker left the room, was banned or lost access.",
                &self.schedules_stopped,
            ),
            ("richbot_voice_transcribed_total", "Voice messages transcribed.", &self.voice_transcribed),
            ("richbot_voice_seconds_total", "Seconds of voice messages transcribed.", &self.voice_seconds),
            (
                "richbot_voice_refused_total",
                "Voice messages not transcribed: too long, too large, or over the asker's budget.audio_seconds_per_day.",
                &self.voice_refused,
            ),
            (
                "richbot_voice_failed_total",
                "Voice messages the transcription endpoint failed or refused (logged with why).",
                &self.voice_failed,
            ),
            ("richbot_voice_replies_total", "Answers spoken as voice messages (voice_replies).", &self.voice_replies),
        ];
        let crypto = self.crypto.get().map(|c| {
            [
                ("richbot_e2ee_decrypted_total", "Encrypted messages decrypted.", &c.decrypted),
                ("richbot_e2ee_encrypted_total", "Writes encrypted for encrypted rooms.", &c.encrypted),
                (
                    "richbot_e2ee_undecryptable_total",
                    "Encrypted messages given up on (their key never came, was withheld, or they were broken).",
                    &c.undecryptable,
                ),
                (
                    "richbot_e2ee_repeated_key_counts_total",
                    "Key counts a transaction repeated for a persona's device, not stored again.",
                    &c.repeated_counts,
                ),
                (
                    "richbot_e2ee_inbox_set_aside_total",
                    "Crypto inbox rows (to-device messages, key counts) set aside after failing again and again.",
                    &c.set_aside,
                ),
            ]
        });
        for (name, help, value) in counters.into_iter().chain(crypto.into_iter().flatten()) {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP richbot_schedules_active Active schedules.\n# TYPE richbot_schedules_active gauge\nrichbot_schedules_active {}",
            self.schedules_active.load(Ordering::Relaxed)
        );
        let _ =
            writeln!(out, "# HELP richbot_turns_total Finished turns by outcome.\n# TYPE richbot_turns_total counter");
        if let Ok(map) = self.turns.lock() {
            for (outcome, n) in map.iter() {
                let _ = writeln!(out, "richbot_turns_total{{outcome=\"{}\"}} {n}", escape(outcome));
            }
        }
        let _ = writeln!(
            out,
            "# HELP richbot_tool_calls_total Tool calls by tool and result.\n# TYPE richbot_tool_calls_total counter"
        );
        labelled(&mut out, &self.tool_calls, "richbot_tool_calls_total", "tool");
        let _ = writeln!(
            out,
            "# HELP richbot_agent_writes_total Agent clients' sends and edits by client and result.\n# TYPE richbot_agent_writes_total counter"
        );
        labelled(&mut out, &self.agent_writes, "richbot_agent_writes_total", "client");
        out
    }
}

/// One series per (`label`, result) pair of `map`.
fn labelled(out: &mut String, map: &Mutex<BTreeMap<(String, String), u64>>, name: &str, label: &str) {
    if let Ok(map) = map.lock() {
        for ((value, result), n) in map.iter() {
            let _ = writeln!(out, "{name}{{{label}=\"{}\",result=\"{}\"}} {n}", escape(value), escape(result));
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The metrics router: `GET /metrics`.
pub fn router(metrics: std::sync::Arc<Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let m = metrics.clone();
            async move { ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], m.render()) }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_labelled_series() {
        let m = Metrics::default();
        Metrics::inc(&m.transactions);
        Metrics::add(&m.events_new, 3);
        m.turn("llm_failed");
        m.turn("answered");
        m.turn("answered");
        m.tool_call("rich_send", "ok");
        m.tool_call("rich_send", "invalid_payload");
        m.tool_call("weird\"tool", "unknown_tool");
        m.agent_write("ci", "ok");
        let text = m.render();
        for line in [
            "richbot_transactions_total 1",
            "richbot_events_stored_total 3",
            "richbot_turns_total{outcome=\"answered\"} 2",
            "richbot_turns_total{outcome=\"llm_failed\"} 1",
            "richbot_tool_calls_total{tool=\"rich_send\",result=\"invalid_payload\"} 1",
            "richbot_tool_calls_total{tool=\"other\",result=\"unknown_tool\"} 1",
            "# TYPE richbot_llm_requests_total counter",
            "richbot_agent_writes_total{client=\"ci\",result=\"ok\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
