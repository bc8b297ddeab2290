//! Posting a turn's text: the model's final answer (`m.text`) or richbot's own word
//! (`m.notice`: an error, a limit, `!usage`), rendered and written through the outbox. An
//! answer longer than one event can hold goes out as several messages, cut at paragraph
//! or line boundaries, each its own write; a code block cut in two is closed and opened
//! again, so each part shows code as code.

use std::borrow::Cow;

use super::Scope;
use crate::clock::rfc3339;
use crate::outbox::{self, Outbox, Write, WriteId};
use crate::render;
use crate::store::{BudgetKind, Spent};
use crate::strings;

/// Most bytes of CommonMark in one message: with its HTML rendering and JSON escaping it
/// stays well inside one event.
pub const MAX_PART_BYTES: usize = 16_000;

/// Why a text was not posted.
#[derive(Debug)]
pub enum PostError {
    /// Not now: the homeserver is unreachable, or the database failed; resume later.
    Later(String),
    /// Not ever: refused for good, or it cannot be rendered.
    Failed(String),
}

/// Posts `text` (CommonMark) from write `id` on (one write per part), in the turn's
/// thread; `notice` makes it an `m.notice`.
pub async fn post(outbox: &Outbox, scope: &Scope, id: WriteId, text: &str, notice: bool) -> Result<(), PostError> {
    let thread = scope.thread.as_deref();
    let render =
        |part: &str| if notice { render::notice(part, thread) } else { render::text_in(part, scope.relation()) };
    for (i, part) in split_fitting(text, &|p| render(p).is_ok()).into_iter().enumerate() {
        let content = render(&part);
        let content = content.map_err(|e| PostError::Failed(format!("the answer cannot be sent: {e}")))?;
        let write =
            Write { id: WriteId { turn: id.turn, seq: id.seq + i as i64 }, room: &scope.room, persona: &scope.persona };
        outbox.send(&write, &content, thread).await.map_err(|e| match e {
            outbox::Error::Unavailable(why) => PostError::Later(why),
            outbox::Error::Store(e) => PostError::Later(format!("store: {e}")),
            e => PostError::Failed(e.to_string()),
        })?;
    }
    Ok(())
}

/// `text` cut into parts of at most `max` bytes: at the last paragraph break that fits,
/// else the last line break, else the last space, else a character boundary.
pub fn split(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let window = &rest[..end];
        let cut = window.rfind("\n\n").or_else(|| window.rfind('\n')).or_else(|| window.rfind(' ')).filter(|&c| c > 0);
        let at = cut.unwrap_or(end);
        parts.push(rest[..at].trim_end());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

/// Parts shorter than this always fit an event, however they render.
const ALWAYS_FITS: usize = 512;

/// `text` cut as [`split`] cuts it at [`MAX_PART_BYTES`], each part cut again (in halves,
/// at the same kind of boundary) until `fits` takes it: what a part's size in bytes cannot
/// tell is how it renders (`<` is four bytes of HTML, an edit carries the text twice).
/// A part cut inside a code block closes it, and the next opens it again (`fenced`).
pub fn split_fitting<'a>(text: &'a str, fits: &dyn Fn(&str) -> bool) -> Vec<Cow<'a, str>> {
    let mut out = Vec::new();
    for part in split(text, MAX_PART_BYTES) {
        refit(part, fits, &mut out);
    }
    fenced(out)
}

/// Room a part keeps for the fence lines `fenced` may add.
const FENCE_ROOM: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

/// The longest language line reopened as it was; a longer one is reopened as its fence.
const OPENER_MAX: usize = 64;

fn refit<'a>(part: &'a str, fits: &dyn Fn(&str) -> bool, out: &mut Vec<&'a str>) {
    if part.len() <= ALWAYS_FITS || fits(&format!("{part}\n{FENCE_ROOM}")) {
        out.push(part);
        return;
    }
    for piece in split(part, part.len() / 2) {
        refit(piece, fits, out);
    }
}

/// Parts cut inside a code block: each closes the block at its end, and the next opens it
/// again with the same fence and language, so every part renders as the code it holds.
fn fenced(parts: Vec<&str>) -> Vec<Cow<'_, str>> {
    let mut open: Option<String> = None;
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        let mut part = match open.take() {
            Some(opener) => Cow::Owned(format!("{opener}\n{p}")),
            None => Cow::Borrowed(p),
        };
        if let Some(opener) = render::open_fence(&part) {
            let fence = render::fence_of(opener).to_owned();
            open = Some(if opener.len() <= OPENER_MAX { opener.to_owned() } else { fence.clone() });
            part = Cow::Owned(format!("{part}\n{fence}"));
        }
        out.push(part);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_answers_split_at_paragraphs_then_lines_each_within_the_cap() {
        let para = "word ".repeat(30).trim_end().to_owned(); // 149 bytes
        let text = [para.as_str(); 5].join("\n\n");
        let parts = split(&text, 400);
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert!(parts.iter().all(|p| p.len() <= 400 && !p.starts_with('\n')));
        assert_eq!(parts.join("\n\n"), text, "nothing lost");
        let lines = [para.as_str(); 4].join("\n");
        assert!(split(&lines, 400).iter().all(|p| p.len() <= 400 && p.lines().all(|l| l == para)));
        let unbroken = "é".repeat(300);
        assert!(split(&unbroken, 101).iter().all(|p| p.len() <= 101));
        assert_eq!(split("short", 400), ["short"]);
    }

    #[test]
    fn parts_are_cut_again_until_they_fit_as_they_render() {
        let code = "a<b\n".repeat(3_000); // 12 KB, four times that as HTML
        let parts = split_fitting(&code, &render::fits_as_edit);
        assert!(parts.len() > 1, "{}", parts.len());
        assert!(parts.iter().all(|p| render::fits_as_edit(p)));
        assert_eq!(parts.join("\n"), code.trim(), "nothing lost");
        assert_eq!(split_fitting("short", &|_| false), ["short"], "a short part is never cut");
    }

    #[test]
    fn a_code_block_cut_in_two_is_closed_and_opened_again_with_its_language() {
        let code = format!("Here:\n\n```rust\n{}```\n\nAfter.", "let a = b < c;\n".repeat(1_200));
        let parts = split_fitting(&code, &|p| p.len() < 8_000);
        assert!(parts.len() > 2, "{}", parts.len());
        for (i, p) in parts.iter().enumerate() {
            assert!(render::open_fence(p).is_none(), "part {i} leaves no block open");
            if i > 0 && i < parts.len() - 1 {
                assert!(p.starts_with("```rust\n") && p.ends_with("\n```"), "part {i}: {}", &p[..20]);
            }
        }
        let html = render::markdown_html(&parts[1]);
        assert!(html.starts_with("<pre><code class=\"language-rust\">let a = b &lt; c;"), "{}", &html[..60]);
        let lines = |s: &str| s.lines().filter(|l| !l.is_empty() && !l.starts_with("```")).map(str::to_owned).collect();
        let (got, want): (Vec<String>, Vec<String>) = (parts.iter().flat_map(|p| lines(p)).collect(), lines(&code));
        assert!(got == want, "nothing lost: {} lines, {} wanted", got.len(), want.len());
    }
}
