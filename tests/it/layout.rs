//! The layout as a checked rule, not a hope: `src/lib.rs` declares its modules in order,
//! and a module may use only modules declared after it (no upward import, so no circle),
//! and no two files of one module import each other;
//! no file of code under `src/` is over 400 lines, where the house style splits a file at
//! the latest (by idea first: the block catalogue is data, not code);
//! the PostgreSQL run of the suite leaves out no module that keeps state.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules, in the order `lib.rs` declares them.
fn modules() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    lib.lines().filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';').map(str::to_owned)).collect()
}

/// Every `.rs` file of a top-level module (a file, or a folder of files).
fn files_of(module: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    crate::support::files_under(&src().join(module), "rs")
}

/// The names a source text reaches through `prefix` (`crate::`, `super::`), in paths and
/// `use` groups.
fn refs(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(|item| item.trim().split("::").next().unwrap_or("").to_owned()));
        } else {
            out.push(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
    }
    out.retain(|name| !name.is_empty());
    out
}

/// The top-level modules a source text reaches through `crate::`.
fn crate_refs(text: &str) -> Vec<String> {
    refs(text, "crate::")
}

#[test]
fn modules_use_only_modules_declared_after_them() {
    let order = modules();
    assert!(order.len() > 10, "read the module list from lib.rs: {order:?}");
    let mut upward = Vec::new();
    for (i, module) in order.iter().enumerate() {
        for file in files_of(module) {
            let text = std::fs::read_to_string(&file).expect("source");
            for name in crate_refs(&text) {
                match order.iter().position(|m| *m == name) {
                    Some(j) if j <= i && name != *module => {
                        upward.push(format!("{} uses {name}", file.display()));
                    }
                    Some(_) => {}
                    None if name.chars().next().is_some_and(char::is_lowercase) => {
                        upward.push(format!("{} uses crate::{name}, which lib.rs does not declare", file.display()));
                    }
                    // A type the crate root re-exports from a module below.
                    None => {}
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up the module list:\n{}", upward.join("\n"));
}

#[test]
fn no_two_files_of_a_module_import_each_other() {
    let mut circles = Vec::new();
    for module in modules() {
        let files = files_of(&module);
        let stem = |p: &PathBuf| p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        // Siblings of one folder, as `super::` names them (a file's own tests excluded).
        let refs: Vec<(PathBuf, Vec<String>)> = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("source");
                let code = text.split("#[cfg(test)]").next().unwrap_or_default().to_owned();
                (f.clone(), refs(&code, "super::"))
            })
            .collect();
        for (a, a_refs) in &refs {
            for (b, b_refs) in &refs {
                let siblings = a.parent() == b.parent() && a < b;
                if siblings && a_refs.contains(&stem(b)) && b_refs.contains(&stem(a)) {
                    circles.push(format!("{} <-> {}", a.display(), b.display()));
                }
            }
        }
    }
    assert!(circles.is_empty(), "break these circles:\n{}", circles.join("\n"));
}

#[test]
fn no_file_of_code_is_over_400_lines() {
    let mut long = Vec::new();
    for module in modules().iter().map(String::as_str).chain(["lib", "main"]) {
        let files = if module == "lib" || module == "main" {
            vec![src().join(format!("{module}.rs"))]
        } else {
            files_of(module)
        };
        for file in files {
            let lines = std::fs::read_to_string(&file).expect("source").lines().count();
            if lines > 400 && !file.ends_with("blocks/catalogue.rs") {
                long.push(format!("{}: {lines} lines", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "split these:\n{}", long.join("\n"));
}

/// The PostgreSQL run (`tests/it_postgres`) includes every module of `tests/it` that keeps
/// state, and only those: a new stateful test file cannot silently run on SQLite alone.
#[test]
fn the_postgres_run_has_every_module_that_keeps_state() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(tests.join("it_postgres/main.rs")).expect("it_postgres/main.rs");
    // Modules taken from tests/it (its own, such as `serving`, are not counted).
    let lines: Vec<&str> = main.lines().collect();
    let mut listed: Vec<String> = lines
        .windows(2)
        .filter(|w| w[0].starts_with("#[path = \"../it/"))
        .filter_map(|w| w[1].strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned))
        .collect();
    // What these test is the config and the packaging around SQLite, a real model server
    // (slow), SQLite's own WAL flushes, or the edit pace the process keeps above the store,
    // not the store as both databases have it.
    const SQLITE_ONLY: [&str; 6] = ["first_run", "packaging", "e2e_llama", "ai_qwen", "outbox_flush", "outbox_pace"];
    let mut stateful = vec!["support".to_owned()];
    for entry in std::fs::read_dir(tests.join("it")).expect("tests/it") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if path.extension().is_none_or(|e| e != "rs")
            || name == "main"
            || name == "layout"
            || SQLITE_ONLY.contains(&name.as_str())
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        if ["Env::start", "database_url(", "Store::open(", "fake_hs::"].iter().any(|m| text.contains(m)) {
            stateful.push(name);
        }
    }
    stateful.sort_unstable();
    listed.sort_unstable();
    assert_eq!(listed, stateful);
}
