//! Loading a payload leniently, from text or from a value: any v1 envelope loads; a block
//! of a known type at version 1 keeps its fields for validation, anything else (an unknown
//! type, a newer version) is kept byte-for-byte as an unknown block.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{Block, BlockError, BlockSpec, spec};

#[derive(Deserialize)]
struct Envelope<'a> {
    v: Option<Value>,
    #[serde(borrow)]
    blocks: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct BlockHead {
    #[serde(rename = "type")]
    ty: Option<Value>,
    v: Option<Value>,
}

/// The blocks of a payload given as JSON text.
pub(super) fn from_text(text: &str) -> Result<Vec<Block>, BlockError> {
    let envelope: Envelope<'_> = serde_json::from_str(text).map_err(|e| {
        BlockError::at("", format!("payload must be a JSON object {{\"v\": 1, \"blocks\": [...]}} ({e})"))
    })?;
    version(envelope.v.as_ref())?;
    let raw_blocks = envelope.blocks.ok_or_else(|| BlockError::at("blocks", "missing; give 1-8 blocks"))?;
    raw_blocks.into_iter().enumerate().map(|(i, raw)| load_block(i, raw)).collect()
}

/// The blocks of a payload given as a JSON value (consumed, not cloned).
pub(super) fn from_value(value: Value) -> Result<Vec<Block>, BlockError> {
    let Value::Object(mut map) = value else {
        return Err(BlockError::at("", "payload must be a JSON object {\"v\": 1, \"blocks\": [...]}"));
    };
    version(map.get("v"))?;
    let Some(Value::Array(raw_blocks)) = map.remove("blocks") else {
        return Err(BlockError::at("blocks", "missing; give 1-8 blocks"));
    };
    raw_blocks.into_iter().enumerate().map(|(i, b)| load_owned(i, b)).collect()
}

fn version(v: Option<&Value>) -> Result<(), BlockError> {
    match v {
        Some(Value::Number(n)) if n.as_u64() == Some(1) => Ok(()),
        Some(v) => Err(BlockError::at("v", format!("unsupported payload version {v} (expected 1)"))),
        None => Err(BlockError::at("v", "missing; a payload is {\"v\": 1, \"blocks\": [...]}")),
    }
}

fn not_a_block(i: usize) -> BlockError {
    BlockError::at(format!("blocks[{i}]"), "each block must be an object with a string \"type\"")
}

/// A block's type and version from its head: `Some(spec)` when it is a known type at
/// version 1 (a missing `v` means 1), `None` when it is to be kept as an unknown block.
fn classify(
    i: usize,
    ty: Option<&Value>,
    v: Option<&Value>,
) -> Result<(String, Option<u64>, Option<&'static BlockSpec>), BlockError> {
    let Some(Value::String(ty)) = ty else { return Err(not_a_block(i)) };
    let version = match v {
        None => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(_) => {
            return Err(BlockError::at(
                format!("blocks[{i}].v"),
                "block version must be a positive integer (or left out for 1)",
            ));
        }
    };
    let known = spec(ty).filter(|_| matches!(version, None | Some(1)));
    Ok((ty.clone(), version, known))
}

fn load_owned(i: usize, block: Value) -> Result<Block, BlockError> {
    let Value::Object(fields) = block else { return Err(not_a_block(i)) };
    match classify(i, fields.get("type"), fields.get("v"))? {
        (_, _, Some(spec)) => Ok(Block::Known { spec, fields }),
        (ty, version, None) => {
            let text = serde_json::to_string(&fields).map_err(|_| not_a_block(i))?;
            let raw = RawValue::from_string(text).map_err(|_| not_a_block(i))?;
            Ok(Block::Unknown { ty, version, raw })
        }
    }
}

fn load_block(i: usize, raw: &RawValue) -> Result<Block, BlockError> {
    let head: BlockHead = serde_json::from_str(raw.get()).map_err(|_| not_a_block(i))?;
    match classify(i, head.ty.as_ref(), head.v.as_ref())? {
        (_, _, Some(spec)) => {
            let fields: Map<String, Value> = serde_json::from_str(raw.get()).map_err(|_| not_a_block(i))?;
            Ok(Block::Known { spec, fields })
        }
        (ty, version, None) => Ok(Block::Unknown { ty, version, raw: raw.to_owned() }),
    }
}
