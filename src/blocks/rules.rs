//! What the catalogue rows name besides field kinds: the string formats fields use (mxc
//! URLs, button ids, ISO 8601 date-times) and the few rules that span fields (`extra`).
//! Both the rows (`catalogue.rs`) and the engine (`check.rs`) use these; neither imports
//! the other's internals.

use serde_json::{Map, Value};

use super::error::{index, join};

/// A cross-field rule: gets the block object and the block's path.
pub type Extra = fn(&Map<String, Value>, &str) -> Result<(), Failure>;

/// An error before it is attributed to a block: a path and a message.
#[derive(Debug)]
pub struct Failure {
    pub path: String,
    pub message: String,
}

fn fail_at<T>(path: &str, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure { path: path.to_owned(), message: message.into() })
}

/// Cuts `s` to at most `max` characters (for echoing model input back in errors).
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// `mxc://server/id`: both parts non-empty, no whitespace, no further slash in the id.
pub fn is_mxc(s: &str) -> bool {
    s.strip_prefix("mxc://").and_then(|rest| rest.split_once('/')).is_some_and(|(server, id)| {
        let server_ok =
            !server.is_empty() && server.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
        let id_ok = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        server_ok && id_ok
    })
}

/// An `http(s)://host[:port][/path][?query][#fragment]` URL, parsed strictly: only the
/// characters RFC 3986 allows, less quotes (so it cannot break out of an HTML attribute);
/// a host of letters, digits, dots and dashes (or an IPv6 literal); no user info (so
/// `https://bank.example@evil.example` cannot pass for the bank).
pub fn is_web_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://")) else { return false };
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&()*+,;=%".contains(&b);
    if s.len() > 2048 || !rest.bytes().all(allowed) {
        return false;
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return false;
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, after)) if !addr.is_empty() && addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') => {
                ("v6", after.strip_prefix(':'))
            }
            _ => return false,
        },
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let host_ok = host == "v6"
        || (!host.is_empty()
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && !host.starts_with(['.', '-']));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// 1-64 characters of `[A-Za-z0-9_.:-]` (the upstream button-id syntax).
pub fn is_button_id(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b))
}

/// ISO 8601 date-time: `YYYY-MM-DDTHH:MM[:SS[.fff]][Z|±HH:MM]`.
pub fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|d| d.parse::<u32>().ok()).unwrap_or(99);
    if b.len() < 16 || !digits(0..4) || b[4] != b'-' || !digits(5..7) || b[7] != b'-' || !digits(8..10) {
        return false;
    }
    if !matches!(b[10], b'T' | b't' | b' ') || !digits(11..13) || b[13] != b':' || !digits(14..16) {
        return false;
    }
    if !(1..=12).contains(&num(5..7)) || !(1..=31).contains(&num(8..10)) || num(11..13) > 23 || num(14..16) > 59 {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        if !digits(i + 1..i + 3) || num(i + 1..i + 3) > 60 {
            return false;
        }
        i += 3;
        if b.get(i) == Some(&b'.') {
            let start = i + 1;
            i = start;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return false;
            }
        }
    }
    match &b[i..] {
        [] | [b'Z'] | [b'z'] => true,
        [b'+' | b'-', ..] => {
            let rest = &s[i + 1..];
            rest.len() == 5 && digits(i + 1..i + 3) && rest.as_bytes()[2] == b':' && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

/// table: an array row has at most as many cells as there are columns.
pub fn table_cells(block: &Map<String, Value>, path: &str) -> Result<(), Failure> {
    let columns = block.get("columns").and_then(Value::as_array).map_or(0, Vec::len);
    let rows = block.get("rows").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, row) in rows.iter().enumerate() {
        if let Value::Array(cells) = row
            && cells.len() > columns
        {
            return fail_at(
                &index(&join(path, "rows"), i),
                format!("has {} cells but there are {columns} columns", cells.len()),
            );
        }
    }
    Ok(())
}

/// chart: `series` is either one series of numbers (≤ 500) or 1-8 named series objects.
pub fn chart_series(block: &Map<String, Value>, path: &str) -> Result<(), Failure> {
    let series = block.get("series").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let objects = series.iter().filter(|s| s.is_object()).count();
    if objects > 0 && objects != series.len() {
        return fail_at(
            &join(path, "series"),
            "must be all numbers (one series) or all {\"name\", \"values\"} objects, not a mix",
        );
    }
    if objects > 8 {
        return fail_at(&join(path, "series"), format!("at most 8 series (got {objects})"));
    }
    let series_path = join(path, "series");
    for (i, s) in series.iter().enumerate() {
        let at = index(&series_path, i);
        let (values, at) = match s.get("values").and_then(Value::as_array) {
            Some(values) => (values.as_slice(), join(&at, "values")),
            None if s.is_object() => continue,
            None => (std::slice::from_ref(s), at),
        };
        for (j, v) in values.iter().enumerate() {
            let Some(n) = v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok())) else {
                continue;
            };
            if !n.is_finite() || n.abs() > CHART_MAX {
                let at = if s.is_object() { index(&at, j) } else { at.clone() };
                return fail_at(
                    &at,
                    format!(
                        "a chart value must be within ±{CHART_MAX:e} (got {}); scale it, and say so in \"unit\"",
                        cut(&v.to_string(), 40)
                    ),
                );
            }
        }
    }
    Ok(())
}

/// The largest chart value, either way: about the largest integer a double holds exactly
/// (2^53 ≈ 9e15). Beyond it no chart says anything a scaled unit would not, and values
/// near `f64::MAX` overflow a drawing's range.
pub const CHART_MAX: f64 = 1e15;

/// form: `select` and `multi` fields need `options`.
pub fn form_options(block: &Map<String, Value>, path: &str) -> Result<(), Failure> {
    let fields = block.get("fields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, field) in fields.iter().enumerate() {
        let kind = field.get("kind").and_then(Value::as_str);
        if matches!(kind, Some("select" | "multi")) && field.get("options").is_none() {
            return fail_at(&index(&join(path, "fields"), i), "a select or multi field needs \"options\": [\"...\"]");
        }
    }
    Ok(())
}
