//! Environment overrides: `RICHBOT__SECTION__KEY=value` sets one key of the parsed TOML
//! (array items by index), before the typed config is read from it.

pub(super) fn set_path(value: &mut toml::Value, parts: &[String], raw: &str) -> Result<(), String> {
    let Some((head, rest)) = parts.split_first() else { return Err("empty key".into()) };
    let slot: &mut toml::Value = match value {
        toml::Value::Table(t) => {
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
        Ok(())
    } else {
        set_path(slot, rest, raw)
    }
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
