//! Environment overrides: `RICHBOT__SECTION__KEY=value` sets one key of the parsed TOML
//! (array items by index), before the typed config is read from it.
//!
//! An environment value has no type, so one that looks like a number or a boolean is taken
//! as one, unless the file already has that key as a string; and if the typed config then
//! does not read, each such value is tried as the string it was (an all-digit API key
//! stays a key). Error messages never repeat a value: a config holds secrets.

use regex::Regex;

/// Sets the key at `parts` to `raw`; true when `raw` was taken as a number or boolean.
pub(super) fn set_path(value: &mut toml::Value, parts: &[String], raw: &str) -> Result<bool, String> {
    let Some((head, rest)) = parts.split_first() else { return Err("empty key".into()) };
    let slot: &mut toml::Value = match value {
        toml::Value::Table(t) => {
            if rest.is_empty() && matches!(t.get(head), Some(toml::Value::String(_))) {
                t.insert(head.clone(), toml::Value::String(raw.to_owned()));
                return Ok(false);
            }
            let next_is_index = rest.first().is_some_and(|p| p.parse::<usize>().is_ok());
            t.entry(head.clone()).or_insert_with(|| {
                if rest.is_empty() {
                    toml::Value::String(String::new())
                } else if next_is_index {
                    toml::Value::Array(Vec::new())
                } else {
                    toml::Value::Table(Default::default())
                }
            })
        }
        toml::Value::Array(items) => {
            let i: usize = head.parse().map_err(|_| format!("\"{head}\" is not an array index"))?;
            if i > items.len() {
                return Err(format!("index {i} skips items (the array has {})", items.len()));
            }
            if i == items.len() {
                items.push(toml::Value::Table(Default::default()));
            }
            &mut items[i]
        }
        _ => return Err(format!("\"{head}\" is inside a value that is not a table")),
    };
    if rest.is_empty() {
        *slot = scalar(raw);
        Ok(!slot.is_str())
    } else {
        set_path(slot, rest, raw)
    }
}

/// The typed config from `value`; on a type error, each typed override in turn is tried
/// as a string. The error names what is wrong, never a value.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    overrides: &[(Vec<String>, String)],
) -> Result<T, String> {
    let first = match value.clone().try_into::<T>() {
        Ok(config) => return Ok(config),
        Err(e) => hide_values(e.message()),
    };
    for (parts, raw) in overrides {
        let mut retry = value.clone();
        if set_string(&mut retry, parts, raw)
            && let Ok(config) = retry.try_into::<T>()
        {
            return Ok(config);
        }
    }
    Err(first)
}

fn set_string(value: &mut toml::Value, parts: &[String], raw: &str) -> bool {
    let mut slot = value;
    for part in parts {
        slot = match slot {
            toml::Value::Table(t) => match t.get_mut(part) {
                Some(v) => v,
                None => return false,
            },
            toml::Value::Array(items) => match part.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    *slot = toml::Value::String(raw.to_owned());
    true
}

/// A TOML syntax error as "line L, column C: what was expected", without the line's text.
pub(super) fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let message = hide_values(e.message());
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// A message with every quoted value hidden (`invalid type: string "..."`, `invalid value:
/// integer `...``, `unknown variant `...``); field names, which are not secrets, stay.
fn hide_values(message: &str) -> String {
    let value = Regex::new(r#"((?:invalid (?:type|value): [a-z ]*?|unknown variant )\s*)(?:"[^"]*"|`[^`]*`)"#)
        .expect("a fixed pattern");
    value.replace_all(message.trim(), "${1}(a value)").into_owned()
}

fn scalar(raw: &str) -> toml::Value {
    if let Ok(i) = raw.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    match raw {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_place_never_the_value() {
        let text = "[llm]\napi_key = \"sk-secret\nmodel = 1\n";
        let e = toml::from_str::<toml::Value>(text).expect_err("unterminated string");
        let said = syntax_error(text, &e);
        assert!(said.starts_with("line 2, column "), "{said}");
        assert!(!said.contains("sk-secret"), "{said}");
        assert_eq!(
            hide_values("invalid type: integer `12345`, expected a string"),
            "invalid type: integer (a value), expected a string"
        );
    }
}
