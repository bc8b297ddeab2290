//! Live answers: a streamed reply is shown as one message per model reply, posted once
//! its first sentence is complete, with the live marker, then edited in place as text
//! arrives, never faster than the edit pace and each edit holding all the text so far
//! that is fit to show (`render::snapshot`: no half word, heading, table or link; open
//! emphasis, code spans and fences closed). When the reply is complete its message gets a final
//! edit (the whole text, rendered, no marker); a reply longer than one event continues in
//! further messages. A reply that was never shown live is posted whole. A stream cut off
//! part-way, or stopped by the turn's deadline, ends with the text so far and a note,
//! never a message left live.
//!
//! Parts are sized for an edit, the largest form a text takes (it carries the text twice,
//! rendered twice: `render::fits_as_edit`), so no live edit and no final edit is refused
//! for its size. If a final edit is refused all the same, the live message is finished
//! with what it showed and a "continued below" line, and the rest follows as new
//! messages: a long answer is never left live, or lost.
//!
//! An answer sent back to the model (`review`) is not finished: its live message, if it
//! showed one, is carried over to the next reply, which edits and finishes it.
//!
//! Write ids: reply `r`'s live message is write `LIVE + r * 10_000` (later edits follow
//! it, a carried message's by the reply that carries it), its final edit `... + 9_999`,
//! further parts `... + 9_000 + i`; a refused final
//! edit's replacement `... + 7_999` and the rest `... + 8_000 + i`. A resumed turn replays
//! the recorded reply and finds the writes that landed; a live write's content may differ
//! from a crashed run's, so its id alone identifies it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ruma::OwnedEventId;
use tokio::sync::{Notify, watch};

use super::Scope;
use super::notices::{PostError, split_fitting};
use crate::outbox::{self, Outbox, Write, WriteId};
use crate::render;
use crate::strings;

const LIVE: i64 = 2_000_000;
const PER_REPLY: i64 = 10_000;
const FINAL: i64 = 9_999;
const PARTS: i64 = 9_000;
/// A refused final edit: the live message finished with what it showed.
const RESCUE_EDIT: i64 = 7_999;
/// ... and the rest of the text as new messages.
const RESCUE: i64 = 8_000;
/// Notes while tools run, and taking them back.
const NOTES: i64 = 5_000;
/// A reply still streaming this long after it became worth showing is shown live.
const GRACE: Duration = Duration::from_millis(150);

/// What one reply's live message has shown.
#[derive(Debug, Default, Clone)]
struct Shown {
    message: Option<OwnedEventId>,
    /// Writes made to it so far (the post and its edits).
    writes: i64,
    text: String,
}

/// One turn's live messages.
pub(super) struct Live<'a> {
    outbox: &'a Outbox,
    scope: &'a Scope,
    turn: i64,
    interval: Duration,
    shown: Mutex<Shown>,
    /// The last reply's finished message and text, for a note while its tools run.
    finished: Mutex<Option<(u32, OwnedEventId, String)>>,
    /// Notes shown so far (their writes are numbered by it).
    notes: std::sync::atomic::AtomicI64,
    /// The reply being streamed, until its text is put out for good.
    streaming: Mutex<Option<u32>>,
    /// The reply whose live message goes on as the next reply's (its answer was sent back
    /// to the model: the next one finishes what it showed, found by its write id).
    carried: Mutex<Option<u32>>,
}

/// A note shown on a reply's message while a tool runs, to take back when it is done.
pub(super) struct Note {
    reply: u32,
    message: OwnedEventId,
    text: String,
    n: i64,
}

fn id(turn: i64, reply: u32, k: i64) -> WriteId {
    WriteId { turn, seq: LIVE + i64::from(reply) * PER_REPLY + k }
}

/// Whether streamed text is worth showing: never a prefix of `[no reply]` (any case), nor
/// text that starts with it. Only the first bytes are compared: this runs on every piece.
fn worth_showing(text: &str) -> bool {
    let (t, marker) = (text.trim().as_bytes(), strings::NO_REPLY.as_bytes());
    let n = t.len().min(marker.len());
    !(t.is_empty() || t[..n].eq_ignore_ascii_case(&marker[..n]))
}

impl<'a> Live<'a> {
    /// Where and for whom the turn is.
    pub fn scope(&self) -> &Scope {
        self.scope
    }

    pub fn new(outbox: &'a Outbox, scope: &'a Scope, turn: i64) -> Self {
        let interval = Duration::from_millis(outbox.interval_ms());
        Self {
            outbox,
            scope,
            turn,
            interval,
            shown: Mutex::new(Shown::default()),
            finished: Mutex::new(None),
            notes: std::sync::atomic::AtomicI64::new(0),
            streaming: Mutex::new(None),
            carried: Mutex::new(None),
        }
    }

    /// Reply `reply` is not put out: whatever it showed live (this run, or a run a crash
    /// cut short) is the next reply's message, edited and finished by it.
    pub fn carry_over(&self, reply: u32) {
        self.streaming.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let mut carried = self.carried.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A reply carried over twice keeps the first one's message.
        carried.get_or_insert(reply);
    }

    /// At the end of a turn: a message carried over that no later reply finished (the
    /// model ended with nothing to show) no longer says what was sent back; it says that
    /// the answer was withdrawn.
    pub async fn withdraw_carried(&self) {
        let Some(reply) = self.carried.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() else {
            return;
        };
        let Some(message) = self.shown().message else { return };
        let Ok(content) = render::edit(&message, render::Message::text(strings::WITHDRAWN)) else { return };
        if let Err(e) = self.outbox.edit(&self.write(reply, FINAL), &message, &content).await {
            tracing::warn!(error = %e, "could not withdraw an answer sent back to the model");
        }
    }

    fn carried(&self) -> Option<u32> {
        *self.carried.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self, reply: u32, k: i64) -> Write<'_> {
        Write { id: id(self.turn, reply, k), room: &self.scope.room, persona: &self.scope.persona }
    }

    fn shown(&self) -> Shown {
        self.shown.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set_shown(&self, shown: Shown) {
        *self.shown.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = shown;
    }

    /// Follows reply `reply`'s text in `text` until `done` is notified, posting and editing
    /// its live message at the pace. Stops between writes, never in the middle of one.
    pub async fn follow(&self, reply: u32, mut text: watch::Receiver<String>, done: &Notify) {
        if self.carried().is_none() {
            self.set_shown(Shown::default());
        }
        *self.streaming.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reply);
        let mut last_write: Option<Instant> = None;
        loop {
            let due = last_write.map(|t| t + self.interval);
            tokio::select! {
                biased;
                () = done.notified() => return,
                changed = text.changed() => if changed.is_err() { return },
                () = async { match due { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => {}
            }
            if due.is_some_and(|d| Instant::now() < d) {
                continue;
            }
            // Never an annotation the model copied from its prompt, even while it is typed.
            let now_text = super::context::clean_answer(&text.borrow());
            let mut shown = self.shown();
            let parts_now = parts(&now_text);
            let part = parts_now.first().map_or("", |p| p.as_ref());
            // Never a broken snapshot: cut at a safe place, open markup closed.
            let Some((cut, closer)) = render::snapshot(part, shown.message.is_none()) else { continue };
            if cut == shown.text || !worth_showing(cut) {
                continue;
            }
            let snapshot = format!("{cut}{closer}");
            if shown.message.is_none() {
                // A reply that is complete a moment later goes out whole, not live and edited.
                tokio::select! {
                    biased;
                    () = done.notified() => return,
                    () = tokio::time::sleep(GRACE) => {}
                }
            }
            let thread = self.scope.thread.as_deref();
            let result = match &shown.message {
                None => match render::live(&snapshot, self.scope.relation(), None) {
                    Ok(c) => self.outbox.send_live(&self.write(reply, 0), &c, thread).await.map(|(m, _)| Some(m)),
                    Err(_) => continue,
                },
                Some(message) => match render::live(&snapshot, self.scope.relation(), Some(message)) {
                    Ok(c) => self.outbox.edit_live(&self.write(reply, shown.writes), message, &c).await.map(|()| None),
                    Err(_) => continue,
                },
            };
            match result {
                Ok(posted) => {
                    if let Some(m) = posted {
                        shown.message = Some(m);
                    }
                    shown.writes += 1;
                    shown.text = cut.to_owned();
                    last_write = Some(Instant::now());
                    self.set_shown(shown);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a live update did not land; the final write will carry it");
                    last_write = Some(Instant::now());
                }
            }
        }
    }

    /// Puts reply `reply`'s `text` out for good: the live message's final edit (or, if it
    /// was never shown, a new message), then any further parts; `cut` adds the note of a
    /// stream that stopped part-way.
    pub async fn finish(&self, reply: u32, text: &str, cut: bool) -> Result<(), PostError> {
        self.streaming.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let text = text.trim();
        if text.is_empty() || (strings::is_no_reply(text) && !cut) {
            // A carried message is finished by the reply that has something to show.
            return Ok(());
        }
        let full = if cut { format!("{text}\n\n{}", strings::CUT_SHORT) } else { text.to_owned() };
        let parts = parts(&full);
        let thread = self.scope.thread.as_deref();
        // The live message: this run's, or one a crashed run posted (found by its id).
        // The live message: this run's, or one a crashed run posted (found by its id), of
        // this reply or of the one it carries over.
        let from = self.carried.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or(reply);
        let (message, fresh) = match self.shown().message {
            Some(m) => (m, false),
            None => {
                let first = render::text_in(&parts[0], self.scope.relation()).map_err(render_err)?;
                self.outbox.send_live(&self.write(from, 0), &first, thread).await.map_err(later)?
            }
        };
        if !fresh && !self.reads_final(&message, &parts[0]).await {
            let last = render::edit(&message, render::Message::text(&parts[0])).map_err(render_err)?;
            match self.outbox.edit(&self.write(reply, FINAL), &message, &last).await.map_err(later) {
                Ok(_) => {}
                Err(PostError::Failed(why)) => return self.rescue(reply, &message, &full, why).await,
                Err(e) => return Err(e),
            }
        }
        for (i, part) in parts.iter().enumerate().skip(1) {
            let content = render::text(part, thread).map_err(render_err)?;
            self.outbox.send(&self.write(reply, PARTS + i as i64), &content, thread).await.map_err(later)?;
        }
        if parts.len() == 1 {
            *self.finished.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((reply, message, parts[0].to_string()));
        }
        Ok(())
    }

    /// The final edit of reply `reply`'s live message was refused (`why`): the message is
    /// finished with what it showed and a line saying the answer goes on below, and
    /// `full` follows from there as new messages.
    async fn rescue(&self, reply: u32, message: &ruma::EventId, full: &str, why: String) -> Result<(), PostError> {
        tracing::warn!(turn = self.turn, error = %why, "a live answer's final edit was refused; the rest follows as new messages");
        let shown = self.shown().text;
        let rest = full.strip_prefix(shown.as_str()).filter(|_| !shown.is_empty()).unwrap_or(full);
        let ended = format!("{}\n\n{}", shown.trim_end(), strings::CONTINUED_BELOW);
        let content = render::edit(message, render::Message::text(ended.trim_start())).map_err(render_err)?;
        self.outbox.edit(&self.write(reply, RESCUE_EDIT), message, &content).await.map_err(later)?;
        let thread = self.scope.thread.as_deref();
        for (i, part) in parts(rest).iter().enumerate() {
            let content = render::text(part, thread).map_err(render_err)?;
            self.outbox.send(&self.write(reply, RESCUE + i as i64), &content, thread).await.map_err(later)?;
        }
        Ok(())
    }

    /// The turn's deadline stopped a reply while it streamed: its live message, if it has
    /// one, is finished with `text` (what had arrived) and the note of a cut answer.
    pub async fn cut_off(&self, text: &str) -> Result<(), PostError> {
        let Some(reply) = *self.streaming.lock().unwrap_or_else(std::sync::PoisonError::into_inner) else {
            return Ok(());
        };
        if self.shown().message.is_none() {
            return Ok(());
        }
        self.finish(reply, text, true).await
    }

    /// Says on the last reply's message that `tool` is running (live again), if there is
    /// one; the note is taken back with [`Live::tool_done`].
    pub async fn tool_running(&self, tool: &str) -> Option<Note> {
        let (reply, message, text) = self.finished.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        let n = self.notes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shown = format!("{text}\n\n_{}_", strings::running(tool));
        let content = render::live(&shown, self.scope.relation(), Some(&message)).ok()?;
        let write = self.write(reply, NOTES + 2 * n);
        self.outbox.edit_live(&write, &message, &content).await.ok()?;
        Some(Note { reply, message, text, n })
    }

    /// Takes a tool's note back: the message reads as it did, for good.
    pub async fn tool_done(&self, note: Note) {
        let Ok(content) = render::edit(&note.message, render::Message::text(&note.text)) else { return };
        let write = self.write(note.reply, NOTES + 2 * note.n + 1);
        if let Err(e) = self.outbox.edit(&write, &note.message, &content).await {
            tracing::warn!(error = %e, "could not take back a running-tool note");
        }
    }
}

impl Live<'_> {
    /// Whether the message already holds `text` for good (no live marker), as recorded
    /// when it was sent or found.
    async fn reads_final(&self, message: &ruma::EventId, text: &str) -> bool {
        let Ok(Some(sent)) = self.outbox.sent(message).await else { return false };
        let content = sent.get("m.new_content").unwrap_or(&sent);
        content.get(render::LIVE).is_none()
            && content.get("body").and_then(|b| b.as_str()) == Some(render::plain_text(text).as_str())
    }
}

/// A text cut into parts that each fit one event as a live edit.
fn parts(text: &str) -> Vec<std::borrow::Cow<'_, str>> {
    split_fitting(text, &render::fits_as_edit)
}

fn render_err(e: render::Error) -> PostError {
    PostError::Failed(format!("the answer cannot be sent: {e}"))
}

fn later(e: outbox::Error) -> PostError {
    match e {
        outbox::Error::Unavailable(why) => PostError::Later(why),
        outbox::Error::Store(e) => PostError::Later(format!("store: {e}")),
        e => PostError::Failed(e.to_string()),
    }
}
