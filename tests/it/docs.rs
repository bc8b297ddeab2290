//! The documentation keeps up with the code: every key of `richbot.example.toml` is in the
//! configuration reference and nothing else is (so an admin finds each key, and no
//! documented key is one richbot would refuse), and every relative link in the Markdown
//! files (the README, the changelog, `docs/`) leads to a file that exists and, with a
//! `#fragment`, to a heading in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The keys the example config shows, set or commented out, as `section.key`
/// (`personas.localpart`, `agents.clients.name`).
fn example_keys(text: &str) -> BTreeSet<String> {
    let section = Regex::new(r"^#?\s*\[\[?([a-z_.]+)\]\]?\s*(#.*)?$").expect("regex");
    let key = Regex::new(r"^#?\s*([a-z_]+)\s*=").expect("regex");
    let (mut current, mut keys) = (String::new(), BTreeSet::new());
    for line in text.lines() {
        if let Some(c) = section.captures(line) {
            current = c[1].to_string();
        } else if let Some(c) = key.captures(line) {
            assert!(!current.is_empty(), "a key before any section: {line}");
            keys.insert(format!("{current}.{}", &c[1]));
        }
    }
    keys
}

/// The keys the reference documents: the first cell of each table row, in backticks.
fn reference_keys(text: &str) -> BTreeSet<String> {
    let row = Regex::new(r"^\| `([a-z_.]+)` \|").expect("regex");
    text.lines().filter_map(|l| row.captures(l).map(|c| c[1].to_string())).collect()
}

#[test]
fn every_example_key_is_in_the_configuration_reference_and_only_those() {
    let example = example_keys(&read(&root().join("richbot.example.toml")));
    let reference = reference_keys(&read(&root().join("docs/admin/configuration.md")));
    assert!(example.len() > 80, "the example's keys were not found: {example:?}");
    let undocumented: Vec<_> = example.difference(&reference).collect();
    let unknown: Vec<_> = reference.difference(&example).collect();
    assert!(
        undocumented.is_empty(),
        "in richbot.example.toml but not in docs/admin/configuration.md: {undocumented:?}"
    );
    assert!(unknown.is_empty(), "in docs/admin/configuration.md but not in richbot.example.toml: {unknown:?}");
}

#[test]
fn the_key_extraction_sees_commented_sections_and_keys() {
    let keys = example_keys("[a]\nx = 1 # y = 2\n# z = 3\n# [[b.c]]\n# name = \"n\"\n# prose, no key: w\n");
    assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["a.x", "a.z", "b.c.name"]);
    let rows = reference_keys("| Key | Default |\n| --- | --- |\n| `a.x` | `1` |\n| not a key |\n");
    assert_eq!(rows.into_iter().collect::<Vec<_>>(), ["a.x"]);
}

/// The Markdown files a reader follows links in.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    files.extend(crate::support::files_under(&root().join("docs"), "md"));
    files
}

/// The text outside fenced code blocks and inline code, where a link is a link.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let code = Regex::new(r"`[^`]*`").expect("regex");
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|l| code.replace_all(l, "").into_owned() + "\n")
        .collect()
}

/// GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces as
/// dashes, a repeated one numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced).map(|h| h.trim_start_matches('#')) else {
            continue;
        };
        let slug: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_default();
        out.insert(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

fn broken_links(file: &Path) -> Vec<String> {
    let text = read(file);
    let link = Regex::new(r"\]\(([^)\s]+)\)").expect("regex");
    let mut broken = Vec::new();
    for c in link.captures_iter(&prose(&text)) {
        let target = &c[1];
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, fragment) = target.split_once('#').map_or((target, None), |(p, f)| (p, Some(f)));
        let resolved = if path.is_empty() { file.to_path_buf() } else { file.parent().expect("dir").join(path) };
        if !resolved.exists() {
            broken.push(format!("{}: {target} (no such file)", file.display()));
        } else if let Some(fragment) = fragment.filter(|_| resolved.extension().is_some_and(|e| e == "md"))
            && !anchors(&read(&resolved)).contains(fragment)
        {
            broken.push(format!("{}: {target} (no such heading)", file.display()));
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let files = markdown_files();
    assert!(files.len() >= 10, "the chapters were not found: {files:?}");
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_a_missing_file_and_a_missing_heading() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("b.md"), "# B\n## Two words\n").expect("write");
    let a = dir.path().join("a.md");
    std::fs::write(&a, "[ok](b.md#two-words) [gone](c.md) [bad](b.md#three) `[code](x.md)`\n```\n[x](y.md)\n```\n")
        .expect("write");
    let broken = broken_links(&a);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].ends_with("c.md (no such file)") && broken[1].ends_with("b.md#three (no such heading)"));
}

#[test]
fn the_readme_is_a_front_page() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(lines <= 250, "README.md has {lines} lines; the details belong in docs/");
}
