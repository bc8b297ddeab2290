//! Tool schemas every common OpenAI-compatible server takes. llama.cpp's `llama-server`
//! (and Ollama, which shares its converter) and vLLM's guided decoding turn each tool's
//! JSON Schema into a grammar, and refuse the whole request (HTTP 400) over one keyword
//! they cannot convert: a `pattern` with `\S`, `\d` or a lookaround, a `format` they do
//! not know, a remote `$ref`, a bound that is not a whole number. This is the subset
//! they all take, as a check and as a cleaner that removes the rest.
//!
//! Removing a keyword only widens what the grammar lets the model write: richbot's own
//! tools are checked exactly by `plan` (and are written in the subset to begin with), and
//! an MCP server checks its own arguments.

use serde_json::{Map, Value};

/// Keywords kept as they are: what they mean does not depend on the converter.
const ANNOTATIONS: &[&str] = &["description", "title", "default", "examples", "$comment"];
/// The types every converter knows.
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "null"];
/// The string formats llama.cpp turns into a grammar (the others it ignores, vLLM's
/// converters refuse some).
const FORMATS: &[&str] = &["date", "time", "date-time", "uuid"];
/// Most repetitions a bound may ask for: a grammar repeats its rule that many times.
pub const MAX_REPEAT: u64 = 1_000;

/// `schema` with what is outside the subset removed, and a line for each removal
/// (`/properties/id: pattern "^\d+$" (escape \d)`).
pub fn portable(schema: &Value) -> (Value, Vec<String>) {
    let mut removed = Vec::new();
    let clean = visit(schema, "", &mut removed);
    (clean, removed)
}

/// What in `schema` a common converter would refuse (empty when it is portable).
pub fn problems(schema: &Value) -> Vec<String> {
    portable(schema).1
}

fn visit(schema: &Value, at: &str, removed: &mut Vec<String>) -> Value {
    let Some(object) = schema.as_object() else {
        // `true` / `false` schemas: llama.cpp takes neither; `{}` means what `true` does.
        removed.push(format!("{}: the schema {} (not an object)", path(at), short(schema)));
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (key, value) in object {
        let here = format!("{at}/{key}");
        let mut drop = |why: String| removed.push(format!("{}: {key} {} ({why})", path(at), short(value)));
        match key.as_str() {
            k if ANNOTATIONS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            "type" => match value {
                Value::String(t) if TYPES.contains(&t.as_str()) => {
                    out.insert(key.clone(), value.clone());
                }
                Value::Array(ts)
                    if !ts.is_empty() && ts.iter().all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t))) =>
                {
                    out.insert(key.clone(), value.clone());
                }
                _ => drop("an unknown type".to_owned()),
            },
            "properties" | "$defs" | "definitions" => match value.as_object() {
                Some(props) => {
                    let props = props.iter().map(|(k, v)| (k.clone(), visit(v, &format!("{here}/{k}"), removed)));
                    out.insert(key.clone(), Value::Object(props.collect()));
                }
                None => drop("not an object".to_owned()),
            },
            "required" if value.as_array().is_some_and(|r| r.iter().all(Value::is_string)) => {
                out.insert(key.clone(), value.clone());
            }
            "additionalProperties" | "items" => match value {
                Value::Bool(_) if key == "additionalProperties" => {
                    out.insert(key.clone(), value.clone());
                }
                Value::Object(_) => {
                    out.insert(key.clone(), visit(value, &here, removed));
                }
                _ => drop("neither a schema nor a boolean".to_owned()),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value.as_array() {
                Some(all) if !all.is_empty() => {
                    let all = all.iter().enumerate().map(|(i, v)| visit(v, &format!("{here}/{i}"), removed));
                    out.insert(key.clone(), Value::Array(all.collect()));
                }
                _ => drop("not a list of schemas".to_owned()),
            },
            "enum" if value.as_array().is_some_and(|e| !e.is_empty()) => {
                out.insert(key.clone(), value.clone());
            }
            "const" => {
                out.insert(key.clone(), value.clone());
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => match value.as_u64() {
                Some(n) if n <= MAX_REPEAT => {
                    out.insert(key.clone(), value.clone());
                }
                Some(_) => drop(format!("over {MAX_REPEAT}: a grammar would repeat its rule that often")),
                None => drop("not a whole number".to_owned()),
            },
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if value.is_i64() || value.is_u64() {
                    out.insert(key.clone(), value.clone());
                } else {
                    drop("not a whole number".to_owned());
                }
            }
            "format" => match value.as_str() {
                Some(f) if FORMATS.contains(&f) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => drop("a format not every server knows".to_owned()),
            },
            "pattern" => match value.as_str().map(pattern_problem) {
                Some(None) => {
                    out.insert(key.clone(), value.clone());
                }
                Some(Some(why)) => drop(why),
                None => drop("not a string".to_owned()),
            },
            "$ref" => match value.as_str() {
                Some(r) if r.starts_with("#/") => {
                    out.insert(key.clone(), value.clone());
                }
                _ => drop("only references within the schema (#/...) are resolved".to_owned()),
            },
            _ => drop("a keyword not every server takes".to_owned()),
        }
    }
    Value::Object(out)
}

/// Why a regular expression is outside what llama.cpp's converter reads: it must be
/// anchored (`^...$`), and use only literals, `.`, classes, groups, `|` and quantifiers;
/// a backslash may only escape a character that is special, or be `\n`, `\t`, `\r`.
pub fn pattern_problem(pattern: &str) -> Option<String> {
    if !(pattern.starts_with('^') && pattern.ends_with('$') && pattern.len() >= 2) {
        return Some("not anchored with ^...$".to_owned());
    }
    let inner: Vec<char> = pattern[1..pattern.len() - 1].chars().collect();
    let mut in_class = false;
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        match c {
            '\\' => {
                let Some(&next) = inner.get(i + 1) else { return Some("ends with a backslash".to_owned()) };
                let special: &[char] = if in_class {
                    &['\\', ']', '[', 'n', 't', 'r']
                } else {
                    &['\\', '^', '$', '.', '[', ']', '(', ')', '|', '{', '}', '*', '+', '?', 'n', 't', 'r']
                };
                if !special.contains(&next) {
                    return Some(format!("escape \\{next}"));
                }
                i += 2;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class && inner.get(i + 1) == Some(&'?') => {
                return Some("a group with (?: lookaround, non-capturing or named".to_owned());
            }
            '{' if !in_class => {
                let close = inner[i..].iter().position(|&c| c == '}').map(|p| i + p);
                let body: String = close.map(|e| inner[i + 1..e].iter().collect()).unwrap_or_default();
                let bounds: Vec<&str> = body.split(',').collect();
                let numbers = (1..=2).contains(&bounds.len())
                    && !bounds[0].is_empty()
                    && bounds.iter().all(|b| b.chars().all(|c| c.is_ascii_digit()));
                if close.is_none() || !numbers {
                    return Some(format!("quantifier {{{body}}}"));
                }
                if bounds.iter().filter_map(|b| b.parse::<u64>().ok()).any(|n| n > MAX_REPEAT) {
                    return Some(format!("quantifier {{{body}}} over {MAX_REPEAT}"));
                }
                i = close.unwrap_or(i) + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    in_class.then(|| "an unclosed [".to_owned())
}

fn path(at: &str) -> &str {
    if at.is_empty() { "/" } else { at }
}

/// A value as shown in a log line, at most 60 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn patterns_in_the_subset_pass_and_the_rest_say_why() {
        for ok in [r"^\$[!-~]{1,254}$", "^[a-z0-9_]+$", r"^(a|b)\.c?$", r"^[\]\\]{2,}$", "^.*$"] {
            assert_eq!(pattern_problem(ok), None, "{ok}");
        }
        for (bad, why) in [
            (r"^\$\S{1,254}$", r"escape \S"),
            (r"^\d+$", r"escape \d"),
            (r"^[\w-]+$", r"escape \w"),
            ("^(?=a)b$", "(?"),
            ("a+", "anchored"),
            ("^a{1,5000}$", "over 1000"),
            ("^a{x}$", "quantifier"),
            ("^[ab$", "unclosed"),
        ] {
            let said = pattern_problem(bad).unwrap_or_default();
            assert!(said.contains(why), "{bad}: {said}");
        }
    }

    #[test]
    fn what_a_converter_refuses_is_removed_and_named_and_the_rest_kept() {
        let schema = json!({
            "type": "object",
            "description": "kept",
            "properties": {
                "id": {"type": "string", "pattern": "^\\d+$", "description": "digits"},
                "mail": {"type": "string", "format": "email"},
                "when": {"type": "string", "format": "date-time"},
                "n": {"type": "number", "minimum": 0.5, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 50_000}, "maxItems": 3},
                "other": {"$ref": "https://example.org/schema.json"},
                "any": true,
                "choice": {"anyOf": [{"type": "integer"}, {"not": {"type": "null"}}]}
            },
            "required": ["id"],
            "additionalProperties": false,
            "patternProperties": {"^x-": {}}
        });
        let (clean, removed) = portable(&schema);
        assert_eq!(
            clean,
            json!({
                "type": "object",
                "description": "kept",
                "properties": {
                    "id": {"type": "string", "description": "digits"},
                    "mail": {"type": "string"},
                    "when": {"type": "string", "format": "date-time"},
                    "n": {"type": "number", "maximum": 10},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                    "other": {},
                    "any": {},
                    "choice": {"anyOf": [{"type": "integer"}, {}]}
                },
                "required": ["id"],
                "additionalProperties": false
            })
        );
        assert_eq!(removed.len(), 8, "{removed:#?}");
        assert!(
            removed.iter().any(|r| r.starts_with("/properties/id: pattern") && r.contains(r"escape \d")),
            "{removed:#?}"
        );
        assert!(problems(&clean).is_empty());
    }
}
