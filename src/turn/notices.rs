//! Posting a turn's text: the model's final answer (`m.text`) or richbot's own word
//! (`m.notice`: an error, a limit, `!usage`), rendered and written through the outbox.

use super::Scope;
use super::context::rfc3339;
use crate::outbox::{self, Outbox, Write, WriteId};
use crate::render;
use crate::store::{BudgetKind, Spent};
use crate::strings;

/// Posts `text` (CommonMark) as write `id`, in the turn's thread; `notice` makes it an
/// `m.notice`. The error says why, in words for the log and the turn's record.
pub async fn post(outbox: &Outbox, scope: &Scope, id: WriteId, text: &str, notice: bool) -> Result<(), String> {
    let thread = scope.thread.as_deref();
    let content = if notice { render::notice(text, thread) } else { render::text(text, thread) };
    let content = content.map_err(|e| format!("the answer cannot be sent: {e}"))?;
    let write = Write { id, room: &scope.room, persona: &scope.persona };
    outbox.send(&write, &content, thread).await.map(drop).map_err(|e| match e {
        outbox::Error::Store(e) => format!("store: {e}"),
        e => e.to_string(),
    })
}

/// The notice for a spent budget: which one, its size, and when it refills.
pub fn budget_spent(spent: Spent, limit: u64) -> String {
    let which = match spent.kind {
        BudgetKind::User => "your",
        BudgetKind::Room => "this room's",
        BudgetKind::Deployment => "everyone's",
    };
    strings::budget_spent(which, limit, &rfc3339(spent.refills_at))
}
