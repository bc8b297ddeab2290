//! Characters a reader cannot see. Two uses, two sets:
//!
//! - [`is_invisible`]: everything that renders as nothing or turns the text around it
//!   (bidi controls, zero-width marks, fillers, variation selectors, tags). What a person
//!   must judge exactly (a tool call's arguments before they approve it) shows each as a
//!   `\uXXXX` escape.
//! - [`strip_deceptive`]: the subset that can make a one-line text read as something else
//!   (`invoice<U+202E>fdp.exe` shows as `invoiceexe.pdf`): bidi overrides, embeddings,
//!   isolates and marks, and the zero-width characters that join nothing. They are
//!   dropped from file names and one-line fields of what a persona posts. Joiners
//!   (U+200C, U+200D) and variation selectors stay: emoji sequences and scripts such as
//!   Persian need them, and they turn no text around.

use std::borrow::Cow;

/// Whether `c` is invisible or changes the direction of the text around it.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Whether `c` can make a line read otherwise than it is (see the module docs).
fn is_deceptive(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{180E}' | '\u{200B}' | '\u{200E}' | '\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// `s` without the characters that can make a line read otherwise (borrowed when it has
/// none, as nearly every text has).
pub fn strip_deceptive(s: &str) -> Cow<'_, str> {
    if s.chars().any(is_deceptive) {
        Cow::Owned(s.chars().filter(|c| !is_deceptive(*c)).collect())
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_and_zero_width_characters_leave_a_line_but_joiners_stay() {
        assert_eq!(strip_deceptive("invoice\u{202E}fdp.exe"), "invoicefdp.exe");
        assert_eq!(strip_deceptive("a\u{2066}b\u{2069}c\u{200B}d\u{FEFF}e\u{200F}"), "abcde");
        let family = "👨\u{200D}👩\u{200D}👧 ❤\u{FE0F} می\u{200C}خواهم";
        assert!(matches!(strip_deceptive(family), Cow::Borrowed(_)), "joiners and variation selectors stay");
        assert!(is_invisible('\u{200D}') && is_invisible('\u{202E}') && !is_invisible('a'));
    }
}
