//! What the model gets back from an MCP tool: the text of its result, cut to a length a
//! prompt can carry. Pure.
//!
//! Text blocks are joined; structured content stands in when there is no text; images
//! are numbered in the text and handed on apart (the turn uploads them, so the model can
//! show them by `mxc://` URL); audio and embedded resources are named, not inlined (their
//! bytes would only spend tokens).

use rmcp::model::{CallToolResult, ContentBlock};

/// Characters of one tool result at most.
pub const MAX_RESULT: usize = 16_000;

/// The result's text for the model, and whether the tool said it failed (`isError`).
pub fn text_of(result: &CallToolResult) -> (String, bool) {
    let mut images = 0;
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => {
                images += 1;
                format!("[image {images} ({})]", cut_mime(&i.mime_type))
            }
            ContentBlock::Audio(_) => "[audio was left out]".to_owned(),
            ContentBlock::Resource(_) => "[an embedded resource was left out]".to_owned(),
            ContentBlock::ResourceLink(r) => format!("[resource: {}]", r.uri),
            _ => "[content of another kind was left out]".to_owned(),
        })
        .collect();
    if !result.content.iter().any(|b| matches!(b, ContentBlock::Text(_)))
        && let Some(structured) = &result.structured_content
    {
        parts.insert(0, structured.to_string());
    }
    (cut(&parts.join("\n")), result.is_error == Some(true))
}

/// The result's images, in order, as `(mimetype, base64 data)`.
pub fn images_of(result: &CallToolResult) -> Vec<(String, String)> {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image(i) => Some((cut_mime(&i.mime_type), i.data.clone())),
            _ => None,
        })
        .collect()
}

/// A media type as a server gave it, cut to a length worth quoting.
fn cut_mime(mime: &str) -> String {
    crate::blocks::cut(mime, 60)
}

/// `text`, or its first [`MAX_RESULT`] characters and a note of how much was left out.
pub fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_RESULT) {
        None => text.to_owned(),
        Some((at, _)) => {
            let left = text[at..].chars().count();
            format!("{}\n[cut: {left} more characters]", &text[..at])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).expect("a CallToolResult")
    }

    #[test]
    fn text_blocks_are_joined_and_errors_flagged() {
        let r = result(serde_json::json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}));
        assert_eq!(text_of(&r), ("a\nb".to_owned(), false));
        let r = result(serde_json::json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}));
        assert_eq!(text_of(&r), ("no such file".to_owned(), true));
    }

    #[test]
    fn structured_content_stands_in_for_missing_text_and_images_are_named() {
        let r = result(serde_json::json!({
            "content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}],
            "structuredContent": {"n": 1}
        }));
        assert_eq!(text_of(&r).0, "{\"n\":1}\n[image 1 (image/png)]");
        assert_eq!(images_of(&r), [("image/png".to_owned(), "aGk=".to_owned())]);
    }

    #[test]
    fn long_results_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_RESULT + 5);
        let out = cut(&long);
        assert!(out.starts_with(&"é".repeat(MAX_RESULT)));
        assert!(out.ends_with("[cut: 5 more characters]"), "{}", &out[out.len() - 40..]);
        assert_eq!(cut("short"), "short");
    }
}
