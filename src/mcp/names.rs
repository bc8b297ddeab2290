//! Which names the model is offered for MCP tools, and why a name is refused. Pure.
//!
//! A server's tool `read` is offered as `<server>__read`. OpenAI-compatible APIs take
//! function names of 1-64 characters from `[A-Za-z0-9_-]`, and a reply's calls are told
//! apart by name alone, so a name that breaks the rule or is already taken (by the rich
//! tools, another tool of the same server, or another server's) is refused with a line
//! that names it and where it came from.

/// The longest tool name the APIs take.
pub const MAX_NAME: usize = 64;

/// The name `tool` of `server` is offered under.
pub fn exposed(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

/// Whether the APIs take `name` as a function name.
pub fn valid(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Splits `server`'s `tools` into the names offered (in order) and the problems of the
/// rest; `taken` holds the names already offered, with who offers them, and grows.
pub fn admit<'a>(
    server: &str,
    tools: impl IntoIterator<Item = &'a str>,
    taken: &mut Vec<(String, String)>,
) -> (Vec<&'a str>, Vec<String>) {
    let (mut ok, mut problems) = (Vec::new(), Vec::new());
    for tool in tools {
        let name = exposed(server, tool);
        if tool.is_empty() {
            problems.push(format!("MCP server {server}: a tool without a name"));
        } else if name.len() > MAX_NAME {
            problems.push(format!(
                "MCP server {server}: tool \"{tool}\" would be offered as {name}, {} characters; \
                 tool names may have at most {MAX_NAME}: give the server a shorter name",
                name.len()
            ));
        } else if !valid(&name) {
            problems.push(format!(
                "MCP server {server}: tool \"{tool}\" would be offered as \"{name}\", which is not a valid tool name \
                 (A-Z a-z 0-9 _ - only)"
            ));
        } else if let Some((_, by)) = taken.iter().find(|(n, _)| *n == name) {
            problems.push(format!(
                "tool name {name} clashes: offered by {by} and by MCP server {server} (tool \"{tool}\")"
            ));
        } else {
            taken.push((name, format!("MCP server {server} (tool \"{tool}\")")));
            ok.push(tool);
        }
    }
    (ok, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich() -> Vec<(String, String)> {
        ["rich_send", "rich_edit"].iter().map(|n| ((*n).to_owned(), "richbot".to_owned())).collect()
    }

    #[test]
    fn tools_are_offered_under_their_server() {
        let mut taken = rich();
        let (ok, problems) = admit("files", ["read", "write-all"], &mut taken);
        assert_eq!(ok, ["read", "write-all"]);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(taken.iter().any(|(n, _)| n == "files__write-all"));
    }

    #[test]
    fn a_name_over_64_characters_is_refused_naming_it() {
        let tool = "t".repeat(60);
        let (ok, problems) = admit("files", [tool.as_str(), "ok"], &mut rich());
        assert_eq!(ok, ["ok"]);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains(&format!("files__{tool}")) && problems[0].contains("67 characters"),
            "{problems:?}"
        );
    }

    #[test]
    fn names_the_apis_refuse_are_refused() {
        let (ok, problems) = admit("files", ["read.file", "grep files", ""], &mut rich());
        assert!(ok.is_empty());
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("\"files__read.file\""));
        assert!(problems[2].contains("a tool without a name"));
    }

    #[test]
    fn a_clash_names_both_sides() {
        let mut taken = rich();
        let _ = admit("a_", ["b"], &mut taken);
        let (ok, problems) = admit("a", ["_b", "c", "c"], &mut taken);
        assert_eq!(ok, ["c"]);
        assert_eq!(problems.len(), 2);
        assert!(
            problems[0].contains("a___b")
                && problems[0].contains("MCP server a_ (tool \"b\")")
                && problems[0].contains("MCP server a (tool \"_b\")"),
            "{problems:?}"
        );
        assert!(problems[1].contains("a__c clashes"), "{problems:?}");
    }

    #[test]
    fn validity_follows_the_api_rule() {
        assert!(valid("files__read-1"));
        assert!(!valid(""));
        assert!(!valid(&"x".repeat(65)));
        assert!(!valid("a.b"));
    }
}
