//! Live messages (MSC4357): a streamed answer as it stands, marked as still being
//! written, and the size test its parts must pass so that every form of it fits an event.

use std::sync::LazyLock;

use ruma::EventId;
use serde_json::{Value, json};

use super::{Error, Message, Relation, edit, text_in};

/// The longest event id there is (255 bytes), to size an edit before its target is known.
static LONGEST_ID: LazyLock<ruma::OwnedEventId> = LazyLock::new(|| {
    ruma::OwnedEventId::try_from(format!("${}", "x".repeat(254))).expect("a 255-byte event id is valid")
});

/// Whether `markdown` fits one event even as a live edit, the largest form it takes: the
/// text twice (`body` and `m.new_content`), rendered twice, with the live marker, editing
/// the longest event id there is. Streamed answers are cut into parts that pass this, so
/// neither a live edit nor the final edit can be refused for its size.
pub fn fits_as_edit(markdown: &str) -> bool {
    live(markdown, Relation::default(), Some(&LONGEST_ID)).is_ok()
}

/// The live marker (MSC4357): a message still being written, edited as text arrives.
pub const LIVE: &str = "org.matrix.msc4357.live";

/// A streamed answer as it stands: a text message carrying the live marker (in an edit,
/// in `m.new_content` as well). `original` makes it an edit of that message.
pub fn live(markdown: &str, rel: Relation<'_>, original: Option<&EventId>) -> Result<Value, Error> {
    let mut content = match original {
        Some(original) => edit(original, Message::text(markdown))?,
        None => text_in(markdown, rel)?,
    };
    content[LIVE] = json!({});
    if original.is_some() {
        content["m.new_content"][LIVE] = json!({});
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::text;

    #[test]
    fn live_messages_carry_the_marker_and_final_edits_do_not() {
        let none = Relation { reply_to: None, thread: None };
        let first = live("Hello", none, None).expect("fits");
        assert_eq!(first[LIVE], json!({}));
        let original = ruma::event_id!("$live");
        let more = live("Hello there", none, Some(original)).expect("fits");
        assert_eq!((more[LIVE].clone(), more["m.new_content"][LIVE].clone()), (json!({}), json!({})));
        assert_eq!(more["m.relates_to"]["rel_type"], "m.replace");
        let last = edit(original, Message::text("Hello there.")).expect("fits");
        assert!(last.get(LIVE).is_none() && last["m.new_content"].get(LIVE).is_none());
    }

    #[test]
    fn a_text_fits_as_an_edit_only_when_twice_its_rendering_fits() {
        assert!(fits_as_edit(&"word ".repeat(2_000)));
        // 15.5 KB of prose fits a new message but not an edit, which carries it twice.
        let prose = "word ".repeat(3_100);
        assert!(text(&prose, None).is_ok() && !fits_as_edit(&prose));
        // `<` is four bytes in HTML: 12 KB of it is too much for an edit.
        let code = format!("```\n{}\n```", "a<b ".repeat(3_000));
        assert!(!fits_as_edit(&code));
    }
}
