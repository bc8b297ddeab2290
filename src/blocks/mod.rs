//! The mxblocks v1 block catalogue (tables, weather, charts, trackers, ...), implemented
//! here because the upstream crate is not in the registry. The API mirrors the crate's
//! (`Rich::parse`, `validate`, `canonicalize`, `has_float`, `find_math`) so it can be
//! swapped for it later.
//!
//! Two strictness levels, on purpose:
//! - **Loading** is lenient: any v1 envelope loads; unknown block types and newer block
//!   versions are kept byte-for-byte, so a newer payload never breaks a reader.
//! - **Validation** is strict: it is what a sender may emit. Unknown blocks fail, every
//!   field is checked against the catalogue row (`catalogue.rs`, data not code), and the
//!   error is one line the model can act on.
//!
//! Senders call [`Rich::checked`]: canonicalize numbers, load, validate, then clean the
//! one-line fields of characters that would make them read otherwise (`clean`).

mod catalogue;
mod check;
mod clean;
mod error;
mod keys;
mod load;
mod numbers;
mod rules;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use catalogue::{BlockSpec, CATALOGUE, Kind, MAX_STR, MAX_TEXT, names, spec};
pub use error::BlockError;
pub(crate) use error::{index, join};
pub use keys::{KEY_MTRIX, KEY_MXBLOCKS, READ_ORDER, WriterKey, read_payload, read_used_id};
pub use numbers::{MAX_SAFE_INT, canonicalize, has_float, is_decimal_string};
pub use rules::{CHART_MAX, cut, is_button_id, is_date_time, is_mxc};

/// Most blocks in one payload.
pub const MAX_BLOCKS: usize = 8;
/// Most bytes of a serialized payload.
pub const MAX_PAYLOAD_BYTES: usize = 48 * 1024;

/// A loaded payload: `{"v": 1, "blocks": [...]}`.
#[derive(Debug, Clone)]
pub struct Rich {
    blocks: Vec<Block>,
}

/// One block as loaded.
#[derive(Debug, Clone)]
pub enum Block {
    /// A type in the catalogue at version 1; its fields as they came.
    Known { spec: &'static BlockSpec, fields: Map<String, Value> },
    /// An unknown type or a newer version: kept byte-for-byte, never sent.
    Unknown { ty: String, version: Option<u64>, raw: Box<RawValue> },
}

/// A button of a `buttons`/`chips` block or a card's `actions`, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// What pressing a button does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Action {
    /// The client reacts to the message with `key`.
    React { key: String },
    /// The client sends `body` as the pressing user.
    Send { body: String },
}

impl Rich {
    /// Loads a payload leniently from JSON text (unknown blocks kept byte-for-byte).
    pub fn parse(text: &str) -> Result<Self, BlockError> {
        load::from_text(text).map(|blocks| Self { blocks })
    }

    /// Loads a payload leniently from a JSON value.
    pub fn from_value(value: &Value) -> Result<Self, BlockError> {
        Self::from_owned(value.clone())
    }

    /// What a sender runs: canonicalize numbers, load, validate. Works on the value it is
    /// given (no re-parse), and serializes it once for the size cap.
    pub fn checked(mut value: Value) -> Result<Self, BlockError> {
        canonicalize(&mut value, "")?;
        let size = serialized_len(&value);
        let mut rich = Self::from_owned(value)?;
        rich.validate_blocks()?;
        check_size(size)?;
        for block in &mut rich.blocks {
            if let Block::Known { spec, fields } = block {
                clean::clean_fields(spec.fields, fields);
            }
        }
        Ok(rich)
    }

    /// Loads a payload leniently from an owned JSON value.
    fn from_owned(value: Value) -> Result<Self, BlockError> {
        load::from_value(value).map(|blocks| Self { blocks })
    }

    /// Strict validation: what a sender may emit.
    pub fn validate(&self) -> Result<(), BlockError> {
        self.validate_blocks()?;
        check_size(self.serialized_len())
    }

    fn validate_blocks(&self) -> Result<(), BlockError> {
        let n = self.blocks.len();
        if n == 0 || n > MAX_BLOCKS {
            return Err(BlockError::at("blocks", format!("at most {MAX_BLOCKS} blocks and at least 1 (got {n})")));
        }
        for (i, block) in self.blocks.iter().enumerate() {
            let path = || format!("blocks[{i}]");
            match block {
                Block::Known { spec, fields } => {
                    check::check_block(spec, fields, i)
                        .map_err(|f| BlockError::in_block(i, spec.name, f.path, f.message))?;
                }
                Block::Unknown { ty, version: Some(v), .. } if spec(ty).is_some() => {
                    return Err(BlockError::in_block(
                        i,
                        ty,
                        path(),
                        format!("block version {v} is not one this sender can emit (use 1 or leave \"v\" out)"),
                    ));
                }
                Block::Unknown { ty, .. } => {
                    let known: Vec<&str> = names().collect();
                    return Err(BlockError::at(
                        path(),
                        format!("unknown block type \"{}\" (known: {})", cut(ty, 40), known.join(", ")),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The length of `to_value()` serialized, without building it.
    fn serialized_len(&self) -> usize {
        let blocks: usize = self
            .blocks
            .iter()
            .map(|b| match b {
                Block::Known { fields, .. } => serialized_len(fields),
                Block::Unknown { raw, .. } => raw.get().len(),
            })
            .sum();
        // {"v":1,"blocks":[ ... ]} with a comma between blocks.
        r#"{"v":1,"blocks":[]}"#.len() + blocks + self.blocks.len().saturating_sub(1)
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The payload as JSON (`{"v": 1, "blocks": [...]}`).
    pub fn to_value(&self) -> Value {
        let blocks = self
            .blocks
            .iter()
            .map(|b| match b {
                Block::Known { fields, .. } => Value::Object(fields.clone()),
                Block::Unknown { raw, .. } => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            })
            .collect();
        serde_json::json!({"v": 1, "blocks": Value::Array(blocks)})
    }

    /// The TeX of every `math` block, in order.
    pub fn find_math(&self) -> Vec<&str> {
        self.known("math").filter_map(|f| f.get("tex")?.as_str()).collect()
    }

    /// Every button (in `buttons`, `chips` and card actions) that parses as a typed button.
    pub fn buttons(&self) -> Vec<Button> {
        let parse = |v: &Value| serde_json::from_value::<Button>(v.clone()).ok();
        let list =
            |f: &Map<String, Value>, key: &str| f.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for block in &self.blocks {
            if let Block::Known { spec, fields } = block {
                let items = match spec.name {
                    "buttons" => list(fields, "buttons"),
                    "chips" => list(fields, "chips"),
                    "card" => list(fields, "actions"),
                    "cards" => list(fields, "cards")
                        .iter()
                        .filter_map(|c| c.get("actions")?.as_array().cloned())
                        .flatten()
                        .collect(),
                    _ => Vec::new(),
                };
                out.extend(items.iter().filter_map(parse));
            }
        }
        out
    }

    fn known<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Map<String, Value>> + 'a {
        self.blocks.iter().filter_map(move |b| match b {
            Block::Known { spec, fields } if spec.name == name => Some(fields),
            _ => None,
        })
    }
}

/// The length of `value` serialized, without building the string.
fn serialized_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(usize::MAX, |()| count.0)
}

fn check_size(size: usize) -> Result<(), BlockError> {
    if size > MAX_PAYLOAD_BYTES {
        return Err(BlockError::at(
            "",
            format!(
                "payload is {size} bytes; at most {MAX_PAYLOAD_BYTES} (48 KiB): shorten it or split it into two messages"
            ),
        ));
    }
    Ok(())
}
