//! What the scripted model answers to "show <kind>": each catalogue type's example (from
//! `tests/golden/blocks.json`) as a `rich_send` with a one-sentence fallback, so what a
//! member sees beyond that sentence is richbot's; pictures and files as `data:` URLs, so
//! richbot uploads them; then a poll and a plain Markdown answer.

use std::io::Cursor;

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::support::llm::{Step, call, text};

/// A picture of `w` x `h` in a hue of its own.
fn picture(w: u32, h: u32, hue: u8) -> String {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([hue, (x * 255 / w) as u8, (y * 255 / h) as u8]));
    let mut png = Vec::new();
    image::DynamicImage::ImageRgb8(img).write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png).expect("png");
    format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png))
}

/// `block` with its `mxc://` examples replaced by pictures and files richbot uploads.
fn with_media(mut block: Value) -> Value {
    let mut hue = 40u8;
    let mut next = || {
        hue = hue.wrapping_add(70);
        picture(320, 200, hue)
    };
    match block["type"].as_str() {
        Some("card") => block["image"] = next().into(),
        Some("cards") => block["cards"].as_array_mut().into_iter().flatten().for_each(|c| c["image"] = next().into()),
        Some("gallery") => block["images"].as_array_mut().into_iter().flatten().for_each(|i| i["url"] = next().into()),
        Some("file") => {
            let csv = base64::engine::general_purpose::STANDARD.encode("city,temp\nLisbon,21\nOslo,3\n");
            block = json!({"type": "file", "url": format!("data:text/csv;base64,{csv}"), "name": "temps.csv"});
        }
        _ => {}
    }
    block
}

/// Every sample, by the kind the member asks for.
pub fn all() -> Vec<(String, Step)> {
    let examples: Map<String, Value> =
        serde_json::from_str(include_str!("../golden/blocks.json")).expect("blocks.json is an object of blocks");
    let mut out: Vec<(String, Step)> = examples
        .into_iter()
        .map(|(kind, block)| {
            let payload = json!({"v": 1, "blocks": [with_media(block)]});
            let step = call("rich_send", json!({"payload": payload, "fallback": format!("Here is the {kind}.")}));
            (kind, step)
        })
        .collect();
    out.push(("poll".into(), call("rich_poll", json!({"question": "Lunch?", "answers": ["Pizza", "Sushi", "Salad"]}))));
    out.push((
        "text".into(),
        text("Plain **Markdown** from the model: a [link](https://matrix.org), `code`, and a list:\n\n- one\n- two"),
    ));
    out
}
