//! The streaming side of written calls: how much of a reply still being written may be
//! shown live, so that a member never sees a call (or the words leading in to one) being
//! typed. The reading side is the module above.

use super::ToolSpec;

/// How much of `text` (being streamed) can be shown: all of it, or up to where something
/// that may become a written call starts (a fence, a tag, a JSON object or a Python call
/// at the start),
/// less a last line that leads in to what is not shown yet.
pub fn shown_until(text: &str, tools: &[ToolSpec]) -> usize {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return 0;
    }
    // An answer that may be one Python call (`countdown(until=…)`) of a tool or a block.
    let names: Vec<&str> =
        tools.iter().map(|t| t.name.as_str()).chain(crate::blocks::CATALOGUE.iter().map(|b| b.name)).collect();
    if super::pythonic::may_become(text, &names) {
        return 0;
    }
    let mut cut = text.len();
    // A JSON object starting a line of its own after prose.
    if let Some(at) = text.find("\n{") {
        cut = at + 1;
    }
    // `<tool` holds back `<tool_call>`, `<tools>` and the `<tool_response>` a model
    // imitating its template writes.
    for opener in ["```", "<tool", "<function"] {
        if let Some(at) = text.find(opener) {
            cut = cut.min(at);
        }
    }
    for tool in tools {
        if let Some(at) = text.find(&format!("<{}", tool.name)) {
            cut = cut.min(at);
        }
    }
    // A tag being typed (`<`, `<to`, `<rich_s` at the end) is held back too.
    if let Some(at) = text.rfind('<').filter(|at| !text[*at..].contains('>')) {
        cut = cut.min(at);
    }
    // A last line that leads in to something (ends with ':') waits for it: a written
    // call's narration ("Here's the payload you need:") is never shown.
    let before = text[..cut].trim_end();
    if before.ends_with(':') {
        cut = before.rfind('\n').map_or(0, |at| at + 1);
    }
    cut
}
