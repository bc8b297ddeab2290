//! A block called as if it were a tool. Small models read `rich_send`'s list of blocks
//! (`chart(series)`, `weather(location,temp)`) as a list of functions and write
//! `{"name": "chart", "arguments": {"series": …}}`: what they mean is a rich message of
//! that one block. [`block_call`] makes it that `rich_send` call, its fallback the
//! block's own plain rendering (everything it shows), so the member reads the rich
//! message at once instead of the model being corrected. The call is then checked like
//! any other: a block that is not valid goes back to the model as `rich_send`'s error.

use serde_json::{Value, json};

use crate::blocks::CATALOGUE;

/// The `rich_send` arguments a call of block `name` with `arguments` means, if `name` is
/// a block type and `arguments` its fields (an object).
pub fn block_call(name: &str, arguments: &Value) -> Option<Value> {
    let spec = CATALOGUE.iter().find(|s| s.name == name)?;
    let mut block = arguments.as_object()?.clone();
    block.remove("type");
    let mut fields = serde_json::Map::from_iter([("type".to_owned(), json!(spec.name))]);
    fields.extend(block);
    let block = Value::Object(fields);
    let fallback = crate::render::render_block(&block).map(|(_, plain)| plain).unwrap_or_default();
    Some(json!({"payload": {"v": 1, "blocks": [block]}, "fallback": fallback}))
}

/// `rich_send` arguments with a payload of blocks and no fallback (small models write
/// the payload alone: `{"blocks": […]}`), with the blocks' own plain renderings as the
/// fallback; `None` when there is a fallback, or no blocks to render.
pub fn fill_fallback(arguments: &Value) -> Option<Value> {
    let given = arguments.get("fallback").and_then(Value::as_str).is_some_and(|f| !f.trim().is_empty());
    let blocks = arguments.get("payload")?.get("blocks")?.as_array()?;
    if given || blocks.is_empty() {
        return None;
    }
    let plain: Vec<String> =
        blocks.iter().filter_map(|b| crate::render::render_block(b).map(|(_, plain)| plain)).collect();
    if plain.iter().all(|p| p.trim().is_empty()) {
        return None;
    }
    let mut filled = arguments.clone();
    filled["fallback"] = plain.join("\n\n").into();
    Some(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_call_is_a_rich_message_of_it_whose_fallback_says_what_it_shows() {
        let series =
            json!({"series": [{"name": "Sales", "values": [120, 135]}], "labels": ["Jan", "Feb"], "kind": "bar"});
        let call = block_call("chart", &series).expect("a rich_send call");
        assert_eq!(call["payload"]["blocks"][0]["type"], "chart");
        assert_eq!(call["payload"]["blocks"][0]["kind"], "bar");
        let fallback = call["fallback"].as_str().expect("a fallback");
        assert!(fallback.contains("Jan") && fallback.contains("135"), "{fallback}");
        assert!(crate::tools::plan(crate::tools::RICH_SEND, &call).is_ok(), "{call}");
        assert_eq!(block_call("web_search", &json!({"q": "x"})), None, "not a block");
        assert_eq!(block_call("chart", &json!("x")), None, "not fields");
    }

    #[test]
    fn a_payload_without_a_fallback_gets_its_blocks_plain_rendering() {
        let table = json!({"type": "table", "columns": ["Month", "Sales"], "rows": [["Jan", "120"], ["Feb", "135"]]});
        let filled = fill_fallback(&json!({"payload": {"v": 1, "blocks": [table]}})).expect("filled");
        let fallback = filled["fallback"].as_str().expect("a fallback");
        assert!(fallback.contains("Jan") && fallback.contains("135"), "{fallback}");
        assert!(crate::tools::plan(crate::tools::RICH_SEND, &filled).is_ok(), "{filled}");
        let given = json!({"payload": {"v": 1, "blocks": [table]}, "fallback": "Sales: Jan 120, Feb 135"});
        assert_eq!(fill_fallback(&given), None, "the model's own fallback stands");
        assert_eq!(fill_fallback(&json!({"payload": "text"})), None, "no blocks");
    }
}
