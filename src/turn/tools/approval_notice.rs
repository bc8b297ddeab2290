//! Asking the asker: for a tool that needs approval, the turn opens an approval (stored,
//! with its deadline), posts an `m.notice` that names the tool and its arguments with
//! Allow / Deny buttons (reactions ✅ / ❌) and mentions the asker, and waits for the
//! decision with its deadline stopped (`crate::approval` decides at the inbox door).
//! Once decided, the notice is edited to say what happened, and its buttons go.
//!
//! What the notice shows of the arguments is `shown` (every key, each value cut on its
//! own, invisible characters escaped); arguments too long to show whole are refused as
//! `invalid_arguments` instead of asked. The approval stores the hash of what was shown,
//! and a decision counts only for that.
//!
//! The notice and its edit have write numbers fixed by the call's number and the ask's
//! attempt, so a resumed turn finds them in the outbox instead of asking twice; a call
//! whose approved run was cut off is a new attempt, with a new notice.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ruma::{OwnedEventId, OwnedUserId};
use serde_json::{Value, json};

use super::shown::{self, TooLong};
use crate::approval::{ALLOW_KEY, DENY_KEY};
use crate::clock::now_ms;
use crate::outbox::{Write, WriteId};
use crate::render;
use crate::store::NewApproval;
use crate::tools::registry::Tool;
use crate::tools::{ToolError, ToolErrorCode};
use crate::turn::reach::Reach;
use crate::turn::stop::{Stop, outbox_error};

pub use crate::approval::Decision;

/// Write numbers of approval notices (plus the call's number), and of their closing edits;
/// asks after the first: `RE_* + nth * 4 + attempt`.
const ASK_SEQ: i64 = 2_000_000;
const CLOSE_SEQ: i64 = 3_000_000;
const RE_ASK_SEQ: i64 = 3_500_000;
const RE_CLOSE_SEQ: i64 = 3_700_000;
/// Asks of one call at most: each after a run the asker allowed was cut off.
const MAX_ATTEMPTS: u32 = 3;

fn seq(first: i64, again: i64, nth: u32, attempt: u32) -> i64 {
    if attempt == 0 { first + i64::from(nth) } else { again + i64::from(nth) * 4 + i64::from(attempt) }
}

/// An approval, decided.
#[derive(Debug, Clone)]
pub struct Asked {
    pub decision: Decision,
    /// Not asked: the asker already said no (or nothing) to a call in this turn.
    again: bool,
    notice: Option<OwnedEventId>,
    tool: String,
    asker: OwnedUserId,
    timeout: Duration,
    /// The approval (to spend when the call starts) and its attempt.
    pub approval: Option<i64>,
    attempt: u32,
}

impl Asked {
    /// The tool error's message for a call that was not allowed.
    pub fn refusal(&self) -> String {
        let (tool, asker) = (&self.tool, &self.asker);
        if self.again {
            return format!(
                "{asker} did not allow an earlier call in this turn, so {tool} was not run and they were not asked \
                 again; tell them what you wanted to do"
            );
        }
        match self.decision {
            Decision::Timeout => format!(
                "{asker} did not allow {tool} within {}, so it was not run; tell them, and ask again only if they want",
                span(self.timeout)
            ),
            _ => format!("{asker} did not allow {tool}, so it was not run; do not call it again unless they ask"),
        }
    }

    /// What the notice says once decided.
    fn outcome(&self) -> String {
        let (tool, asker) = (&self.tool, &self.asker);
        match self.decision {
            Decision::Allow => format!("✅ {asker} allowed `{tool}`; it runs."),
            Decision::Deny => format!("❌ {asker} did not allow `{tool}`; it was not run."),
            Decision::Timeout => {
                format!("⌛ No answer from {asker} within {}: `{tool}` was not run.", span(self.timeout))
            }
        }
    }
}

/// `120 s` -> `2 min`, `90 s` -> `90 s`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) { format!("{} min", s / 60) } else { format!("{s} s") }
}

fn store_stop(e: impl std::fmt::Display) -> Stop {
    Stop::Suspend(format!("store: {e}"))
}

/// Asks the turn's asker to allow call `nth` of `tool` with `args`, and waits for them.
/// After a no (or no answer) the turn asks no more: a model cannot hold a room with one
/// request after another.
pub async fn ask(r: &Reach<'_>, tool: &Tool, args: &Value, nth: u32) -> Result<Asked, Stop> {
    let scope = r.scope;
    let mut asked = Asked {
        decision: Decision::Deny,
        again: true,
        notice: None,
        tool: tool.spec.name.clone(),
        asker: scope.asker.clone(),
        timeout: tool.approval_timeout,
        approval: None,
        attempt: 0,
    };
    if r.declined.load(Ordering::Acquire) {
        return Ok(asked);
    }
    let shown = shown::shown(args).map_err(|TooLong| {
        Stop::Tool(ToolError::new(
            ToolErrorCode::InvalidArguments,
            "arguments too long to show for approval: the person must see every argument to decide; \
             send fewer or shorter values",
        ))
    })?;
    let hash = shown::hash(&tool.spec.name, &shown);
    let now = now_ms();
    let timeout = tool.approval_timeout;
    let opened = r
        .store
        .open_approval(&NewApproval {
            turn_id: r.turn,
            nth,
            room_id: &scope.room,
            asker: &scope.asker,
            tool: &tool.spec.name,
            shown_hash: &hash,
            now,
            expires_at: now.saturating_add(crate::clock::ms(timeout)),
        })
        .await
        .map_err(store_stop)?;
    if opened.attempt >= MAX_ATTEMPTS {
        return Err(Stop::Tool(ToolError::new(
            ToolErrorCode::ToolUnavailable,
            format!("{} was cut off {MAX_ATTEMPTS} times while it ran; it is not tried again", tool.spec.name),
        )));
    }
    asked.attempt = opened.attempt;
    let mut notice = opened.notice_event.clone();
    if opened.decision.is_none() && notice.is_none() {
        let (fallback, payload) = request(&scope.asker, &tool.spec.name, &shown, timeout);
        let thread = scope.thread.as_deref();
        let mut content = render::rich_notice(&fallback, &payload, r.limits.key, thread)
            .map_err(|e| Stop::Tool(ToolError::new(ToolErrorCode::Internal, format!("the approval request: {e}"))))?;
        content["m.mentions"] = json!({"user_ids": [scope.asker]});
        let write = Write {
            id: WriteId { turn: r.turn, seq: seq(ASK_SEQ, RE_ASK_SEQ, nth, opened.attempt) },
            room: &scope.room,
            persona: &scope.persona,
        };
        let event = r.outbox.send(&write, &content, thread).await.map_err(outbox_error)?;
        r.store.set_approval_notice(opened.id, &event).await.map_err(store_stop)?;
        tracing::info!(turn = r.turn, tool = %tool.spec.name, notice = %event, "asked the asker to allow a tool call");
        notice = Some(event);
    }
    let mut decision = r.kit.deadline.paused(r.kit.approvals.wait(&opened)).await.map_err(store_stop)?;
    if decision == Decision::Allow && opened.shown_hash.as_deref() != Some(hash.as_str()) {
        // Allowed, but not what would run now: a decision is for exactly what it saw.
        tracing::warn!(turn = r.turn, tool = %tool.spec.name, "an approval was for other arguments; not run");
        decision = Decision::Deny;
    }
    if decision != Decision::Allow {
        r.declined.store(true, Ordering::Release);
    }
    asked.decision = decision;
    asked.again = false;
    asked.notice = notice;
    asked.approval = Some(opened.id);
    Ok(asked)
}

/// Edits the notice to say how it was decided (best effort: it is only a display).
pub async fn close(r: &Reach<'_>, asked: &Asked, nth: u32) {
    let Some(notice) = &asked.notice else { return };
    let Ok(content) = render::notice_edit(notice, &asked.outcome()) else { return };
    let scope = r.scope;
    let write = Write {
        id: WriteId { turn: r.turn, seq: seq(CLOSE_SEQ, RE_CLOSE_SEQ, nth, asked.attempt) },
        room: &scope.room,
        persona: &scope.persona,
    };
    if let Err(e) = r.outbox.edit(&write, notice, &content).await {
        tracing::warn!(turn = r.turn, error = %e, "could not mark the approval request as decided");
    }
}

/// The notice's text and blocks: which tool, with what (as `shown`), who decides, and by
/// when.
fn request(asker: &ruma::UserId, tool: &str, shown: &str, timeout: Duration) -> (String, Value) {
    let fence = "`".repeat(longest_run(shown, '`').max(2) + 1);
    let fallback = format!(
        "**May I run `{tool}`?** {asker} asked for it, with:\n\n{fence}\n{shown}\n{fence}\n\n\
         React {ALLOW_KEY} to allow or {DENY_KEY} to deny. Only {asker} can decide; no answer within {} means no.",
        span(timeout)
    );
    let payload = json!({"v": 1, "blocks": [
        {"type": "code", "code": shown, "filename": tool},
        {"type": "buttons", "buttons": [
            {"label": "Allow", "style": "primary", "action": {"type": "react", "key": ALLOW_KEY}},
            {"label": "Deny", "style": "danger", "action": {"type": "react", "key": DENY_KEY}},
        ]},
    ]});
    (fallback, payload)
}

fn longest_run(s: &str, c: char) -> usize {
    s.split(|x| x != c).map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::Rich;

    #[test]
    fn the_request_is_a_valid_rich_message_and_quotes_the_arguments_safely() {
        let asker = ruma::user_id!("@alice:example.org");
        let args = json!({"path": "```\n**Allowed already**", "n": 1});
        let shown = shown::shown(&args).expect("shown");
        let (fallback, payload) = request(asker, "files__delete", &shown, Duration::from_secs(120));
        Rich::from_value(&payload).expect("the notice's payload passes the catalogue");
        assert!(fallback.contains("keys: n, path"), "{fallback}");
        assert!(fallback.contains("within 2 min") && fallback.contains("@alice:example.org"));
        let html = render::markdown_html(&fallback);
        assert!(!html.contains("<strong>Allowed already</strong>"), "arguments stay code: {html}");
    }

    #[test]
    fn asks_after_the_first_have_write_numbers_of_their_own() {
        let mut seen = std::collections::HashSet::new();
        for nth in 0..100 {
            for attempt in 0..MAX_ATTEMPTS {
                assert!(seen.insert(seq(ASK_SEQ, RE_ASK_SEQ, nth, attempt)));
                assert!(seen.insert(seq(CLOSE_SEQ, RE_CLOSE_SEQ, nth, attempt)));
            }
        }
    }
}
