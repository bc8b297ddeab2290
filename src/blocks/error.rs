//! The one error type of the catalogue, and its one-line rendering.
//!
//! Every message is read by the model as a tool result, so it names the JSON path first,
//! the block type in parentheses, then what is wrong and what would be right.

use std::fmt;

/// A payload that cannot be sent, with the JSON path of the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BlockError {
    /// Full JSON path of the offending value (`blocks[1].buttons[0].label`), empty for the
    /// payload itself.
    pub path: String,
    /// The block the error is inside, when it is inside one and its type is known.
    pub block: Option<(usize, String)>,
    /// What is wrong and what would be right.
    pub message: String,
}

impl BlockError {
    /// An error at `path` that is not attributed to a block type.
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), block: None, message: message.into() }
    }

    /// An error inside block `index` of type `ty`.
    pub fn in_block(index: usize, ty: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), block: Some((index, ty.to_owned())), message: message.into() }
    }
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.block {
            Some((index, ty)) => {
                let head = format!("blocks[{index}]");
                let rest = self.path.strip_prefix(&head).unwrap_or(&self.path);
                let rest = rest.strip_prefix('.').unwrap_or(rest);
                if rest.is_empty() {
                    write!(f, "{head} ({ty}): {}", self.message)
                } else {
                    write!(f, "{head} ({ty}): {rest}: {}", self.message)
                }
            }
            None if self.path.is_empty() => f.write_str(&self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Appends `.key` (or `[i]`) to a JSON path.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}
