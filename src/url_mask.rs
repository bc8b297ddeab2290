//! Secrets out of what richbot shows: a URL as logs, `check`, errors and the model may see
//! it. One place, so every URL an admin configures (a database, an MCP server, an LLM
//! endpoint) is masked the same way: the userinfo's password (or a lone token) and every
//! query value become `***`; the scheme, host, port and path stay, so the admin can still
//! tell which URL it was.

/// `url` with its credentials masked.
pub fn url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return masked_query(url) };
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            // A database's user name is no secret; a lone userinfo elsewhere is a token.
            None if scheme.starts_with("postgres") => format!("{userinfo}@{host}"),
            None => format!("***@{host}"),
        },
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{}", masked_query(path))
}

/// `path?query#fragment` with each query value, and the fragment, masked.
fn masked_query(path: &str) -> String {
    let (path, fragment) = match path.split_once('#') {
        Some((p, _)) => (p, "#***"),
        None => (path, ""),
    };
    let Some((path, query)) = path.split_once('?') else { return format!("{path}{fragment}") };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) => format!("{key}=***"),
            None => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}{fragment}", pairs.join("&"))
}

/// Every URL inside `text` (an error message that quotes one) masked.
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) =
        ["http://", "https://", "postgres://", "postgresql://"].iter().filter_map(|s| rest.find(s)).min()
    {
        out.push_str(&rest[..at]);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '>' | ')'))
            .map_or(rest.len(), |e| at + e);
        out.push_str(&url(&rest[at..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_tokens_and_query_values_are_masked_and_the_rest_kept() {
        for (given, shown) in [
            ("postgres://rb:s3cr@t@db.example:5432/rb", "postgres://rb:***@db.example:5432/rb"),
            ("postgresql://rb@db/rb?sslmode=require", "postgresql://rb@db/rb?sslmode=***"),
            ("sqlite:///var/lib/richbot/richbot.db", "sqlite:///var/lib/richbot/richbot.db"),
            ("https://mcp.example/mcp?api_key=sk-123&x", "https://mcp.example/mcp?api_key=***&x"),
            ("https://tok@mcp.example:8443/mcp#frag", "https://***@mcp.example:8443/mcp#***"),
            ("http://127.0.0.1:8123/mcp", "http://127.0.0.1:8123/mcp"),
            ("https://h?k=v", "https://h?k=***"),
        ] {
            assert_eq!(url(given), shown, "{given}");
        }
    }

    #[test]
    fn urls_inside_a_message_are_masked() {
        let text = "error sending request for url (https://mcp.example/mcp?api_key=sk-9): refused";
        assert_eq!(urls_in(text), "error sending request for url (https://mcp.example/mcp?api_key=***): refused");
        assert_eq!(urls_in("no url here"), "no url here");
    }
}
