//! What clients that draw no blocks show: every catalogue type's HTML and plain text
//! against golden files (`tests/golden/render/`, one example block per type in
//! `tests/golden/blocks.json`). `RICHBOT_BLESS=1` writes the files anew; review the diff.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn examples() -> Map<String, Value> {
    let text = std::fs::read_to_string(golden().join("blocks.json")).expect("blocks.json");
    serde_json::from_str(&text).expect("blocks.json is an object of blocks")
}

#[test]
fn every_block_type_renders_as_its_golden_html_and_plain_text() {
    let examples = examples();
    let mut names: Vec<&str> = richbot::blocks::names().collect();
    let mut have: Vec<&str> = examples.keys().map(String::as_str).collect();
    names.sort_unstable();
    have.sort_unstable();
    assert_eq!(have, names, "one example per catalogue type");
    let bless = std::env::var_os("RICHBOT_BLESS").is_some();
    let mut differ = Vec::new();
    for (name, block) in &examples {
        let payload = serde_json::json!({"v": 1, "blocks": [block]});
        richbot::blocks::Rich::checked(payload)
            .unwrap_or_else(|e| panic!("{name}: the example is not a valid block: {e}"));
        let (html, plain) = richbot::render::render_block(block).expect("renders");
        for (ext, got) in [("html", html), ("txt", plain)] {
            let path = golden().join("render").join(format!("{name}.{ext}"));
            let got = format!("{got}\n");
            if bless {
                std::fs::write(&path, &got).expect("write golden");
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(got.as_str()) {
                differ.push(format!("{}:\n{got}", path.display()));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "renderings differ from their golden files (RICHBOT_BLESS=1 to write them):\n{}",
        differ.join("\n")
    );
}

#[test]
fn renderings_use_only_the_tags_and_attributes_matrix_allows() {
    for (name, block) in examples() {
        let (html, _) = richbot::render::render_block(&block).expect("renders");
        for tag in html.split('<').skip(1) {
            let inner = tag.split('>').next().unwrap_or_default().trim_start_matches('/');
            let tag_name = inner.split_whitespace().next().unwrap_or_default();
            assert!(richbot::render::TAGS.contains(&tag_name), "{name}: <{tag_name}> is not a Matrix tag");
            for attr in attributes(&inner[tag_name.len()..]) {
                let allowed = matches!(
                    (tag_name, attr.as_str()),
                    ("a", "href") | ("code", "class") | ("div" | "span", "data-mx-maths")
                );
                assert!(allowed, "{name}: <{tag_name} {attr}> is not allowed");
            }
        }
    }
}

/// The attribute names of a tag's inside (`name="value"` pairs; values are escaped, so
/// they hold no quote).
fn attributes(mut rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    while let Some((name, after)) = rest.split_once("=\"") {
        names.push(name.trim().to_owned());
        rest = after.split_once('"').map_or("", |(_, r)| r);
    }
    names
}
