//! Answers cleaned of what a model copies from its prompt. Small models imitate how the
//! conversation is shown to them: a note line (`[Now: … Asked by: …]`, [`note`](super::note)),
//! a speaker prefix (`@richbot:x:` or `@alice:x [$id]:`), an id line (`[event_id: $…]`,
//! as older prompts showed the persona's own messages), the tag of richbot's corrections
//! (`(richbot)`, copied as `[richbot]` too). None of those is for a member:
//! they are taken out of every answer before it is posted. What is left may be empty: the
//! turn then asks the model again rather than post nothing.

use std::sync::LazyLock;

use regex::Regex;

use super::note::OPEN;

/// A speaker prefix at the start of an answer: `@user:server` (and an id), then `:`.
static SPEAKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^@[^\s]+?(?:\s*\[\$[^\]\s]*\])?:\s+").expect("a valid regex"));
/// The tag richbot's corrections start with (`strings::CORRECTION`), copied at the start
/// of an answer, in either brackets.
static TAG: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)^[\[(]richbot[\])]:?\s*").expect("a valid regex"));
/// An id annotation alone on its line, and one anywhere: `[event_id: $x]`, `[$x]`.
static ID_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*\[(?:event_id:\s*)?\$[A-Za-z0-9._~:/+=-]+\][ \t]*(?:\r?\n|$)").expect("a valid regex")
});
static ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[(?:event_id:\s*)?\$[A-Za-z0-9._~:/+=-]+\]").expect("a valid regex"));

/// `text` without copied annotations: note lines, a speaker prefix, id annotations.
pub fn clean_answer(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    // The note (it may run over several lines, as its polls do: up to its closing bracket).
    while let Some(first) = lines.iter().position(|l| !l.trim().is_empty()) {
        if !lines[first].trim_start().starts_with(OPEN) {
            break;
        }
        let end = (first..lines.len()).find(|&i| lines[i].trim_end().ends_with(']')).unwrap_or(first);
        lines.drain(..=end);
    }
    let joined = lines.join("\n");
    let mut out = joined.trim().to_owned();
    // A speaker prefix or a correction's tag, perhaps twice ("@richbot:x: @alice:x [$e]: …").
    while let Some(m) = SPEAKER.find(&out).or_else(|| TAG.find(&out)) {
        out = out[m.end()..].to_owned();
    }
    let out = ID_LINE.replace_all(&out, "");
    ID.replace_all(&out, "").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_notes_prefixes_and_ids_are_taken_out_and_the_answer_kept() {
        let cases = [
            ("The weather is mild.\n[event_id: $abc:x]", "The weather is mild."),
            ("One.\n[event_id: $a]\n\nTwo.", "One.\n\nTwo."),
            ("[Now: 2026-12-06T13:40Z. In: a direct chat with @a:x. Asked by: @a:x.]\nHello!", "Hello!"),
            ("[Now: 2026-12-06T13:40Z. Asked by: @a:x.]", ""),
            ("@richbot:localhost: Sure, here it is.", "Sure, here it is."),
            ("@alice:x [$e1]: Paris is the capital.", "Paris is the capital."),
            ("See [$abc] above, and [event_id: $def].", "See  above, and ."),
            ("A list:\n- one\n- two", "A list:\n- one\n- two"),
            ("Email me@example.org: no prefix at the start.", "Email me@example.org: no prefix at the start."),
            ("```\n[$x] in code\n```", "```\n in code\n```"),
            ("[richbot] I'm sorry, I can't look that up.", "I'm sorry, I can't look that up."),
            ("(richbot) Lisbon.", "Lisbon."),
            ("richbot is my name.", "richbot is my name."),
        ];
        for (text, want) in cases {
            assert_eq!(clean_answer(text), want, "{text:?}");
        }
    }
}
