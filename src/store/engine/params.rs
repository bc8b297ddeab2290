//! Placeholders as each database binds them fastest.
//!
//! The store writes `$1, $2, …` (PostgreSQL's form, which SQLite takes too). But SQLite
//! keeps `$N` as a *named* parameter, and sqlx binds every parameter by asking its name
//! (`sqlite3_bind_parameter_name`), which walks the statement's list of names: binding
//! the n parameters of one statement costs n²/2 steps. For a 100-event insert (900
//! parameters) that was 400,000 steps, most of ingest's CPU (a profile of
//! `cargo bench --bench pipeline -- ingest` put 22% of all samples in that one function).
//! Bare `?` parameters have no name, so they bind in constant time each.
//!
//! [`positional`] turns a statement whose `$N` appear once each, in order from `$1`, into
//! `?`s; the store uses it on SQLite for statements of many parameters (multi-row inserts,
//! `IN` lists). A statement that uses a parameter twice or out of order is left as it is
//! (correct, only slower), so a later edit of the SQL cannot bind a value to the wrong
//! place.

use std::borrow::Cow;

use crate::store::{Backend, Store};

/// `sql` with its `$1, $2, …` as `?`s, when they appear once each in order; else `sql`.
pub fn positional(sql: &str) -> Cow<'_, str> {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let (mut next, mut i, mut copied) = (1usize, 0usize, 0usize);
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            // A string literal: skipped whole (a `$` in it is text).
            let end = sql[i + 1..].find('\'').map_or(bytes.len(), |e| i + 1 + e + 1);
            i = end;
            continue;
        }
        if bytes[i] == b'$' {
            let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if digits > 0 {
                if sql[i + 1..i + 1 + digits].parse::<usize>().ok() != Some(next) {
                    return Cow::Borrowed(sql);
                }
                out.push_str(&sql[copied..i]);
                out.push('?');
                next += 1;
                i += 1 + digits;
                copied = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&sql[copied..]);
    Cow::Owned(out)
}

impl Store {
    /// `sql` (with `$N` placeholders) as this database binds it fastest (see the module
    /// docs); for statements of many parameters.
    pub(in crate::store) fn many_params<'a>(&self, sql: &'a str) -> Cow<'a, str> {
        match self.backend {
            Backend::Sqlite => positional(sql),
            Backend::Postgres => Cow::Borrowed(sql),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::positional;

    #[test]
    fn placeholders_in_order_become_bare_and_any_other_statement_is_left_alone() {
        assert_eq!(
            positional("UPDATE e SET t = $1 WHERE s IN ($2, $3, $4)"),
            "UPDATE e SET t = ? WHERE s IN (?, ?, ?)"
        );
        assert_eq!(positional("VALUES ($1, $2), ($3, $4) -- $ 5"), "VALUES (?, ?), (?, ?) -- $ 5");
        assert_eq!(positional("SELECT '$9' || $1, $2"), "SELECT '$9' || ?, ?");
        assert_eq!(positional("SELECT 1"), "SELECT 1");
        // Out of order, repeated, or not from $1: binding by position would misplace values.
        for kept in ["SELECT $2, $1", "SELECT $1, $1", "SELECT $2", "SELECT $1, $3"] {
            assert_eq!(positional(kept), kept);
        }
        assert_eq!(positional("SELECT $10"), "SELECT $10");
    }
}
