//! Cross-checks between the config and the registration, and the other usual mistakes of a
//! first deployment, each named with its fix. The two files state some facts twice (the
//! server name, where richbot listens); when they disagree, richbot would run and never
//! work, so they fail validation instead (`check` and `serve` alike).

use std::net::SocketAddr;
use std::path::Path;

use regex::Regex;
use ruma::api::appservice::Registration;

use super::Config;

/// Every problem between `config` (listening on `listen`) and `reg`, one line each.
pub fn registration(config: &Config, listen: Option<SocketAddr>, reg: &Registration, problems: &mut Vec<String>) {
    let server = &config.homeserver.server_name;
    for (key, value) in [("as_token", &reg.as_token), ("hs_token", &reg.hs_token)] {
        if crate::registration_file::is_placeholder(value) {
            problems.push(format!(
                "appservice.registration: {key} is a placeholder; generate real tokens with `richbot init` or \
                 `richbot generate-registration` and give the new file to the homeserver"
            ));
        }
    }
    for ns in &reg.namespaces.users {
        if let Some(theirs) = namespace_server(&ns.regex)
            && theirs != *server
        {
            problems.push(format!(
                "homeserver.server_name: \"{server}\" but the registration's user namespace ({}) is for \"{theirs}\"; \
                 the two must name the same server",
                ns.regex
            ));
        }
    }
    if let (Some(listen), Some(url)) = (listen, reg.url.as_deref()) {
        match url_host_port(url) {
            Some((host, port))
                if !config.appservice.behind_proxy
                    && (port != listen.port() || !(listen.ip().is_unspecified() || same_host(&host, listen))) =>
            {
                problems.push(format!(
                    "appservice.listen: richbot listens on {listen} but the registration's url is {url}, where the \
                     homeserver will look for it; make them the same address and port (or, behind a load balancer \
                     at that url, set appservice.behind_proxy = true)"
                ));
            }
            Some(_) => {}
            None => problems.push(format!("appservice.registration: url \"{url}\" is not an http(s) URL with a port")),
        }
    }
}

/// The exclusive user namespaces of other appservices' registration files (relative
/// paths from the config's folder), each a problem naming the file when it cannot be read.
pub fn other_namespaces(files: &[std::path::PathBuf], base: &Path, problems: &mut Vec<String>) -> Vec<Regex> {
    let mut out = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let path = if file.is_relative() { base.join(file) } else { file.clone() };
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_norway::from_str::<Registration>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(reg) => {
                for ns in reg.namespaces.users.iter().filter(|ns| ns.exclusive) {
                    match Regex::new(&format!("^(?:{})$", ns.regex)) {
                        Ok(re) => out.push(re),
                        Err(e) => problems.push(format!("access.other_registrations[{i}]: {}: {e}", path.display())),
                    }
                }
            }
            Err(e) => problems.push(format!(
                "access.other_registrations[{i}]: cannot read {} as a registration: {e}",
                path.display()
            )),
        }
    }
    out
}

/// Whether `allow` admits anyone of this homeserver; if not, a line saying whom it admits.
pub fn access(config: &Config, patterns: &[String], problems: &mut Vec<String>) {
    let server = &config.homeserver.server_name;
    let suffix = format!(":{server}");
    if !patterns.is_empty() && !patterns.iter().any(|p| p.ends_with(&suffix)) {
        problems.push(format!(
            "access.allow: admits only {} and nobody of {server}, so the personas decline every invite from this \
             homeserver; add \"*:{server}\" (everyone here) or the user ids to allow",
            patterns.join(", ")
        ));
    }
}

/// The database URL with a relative path taken from the config's folder, or a problem
/// naming the full path when its folder does not exist.
pub fn database(url: &str, base: &Path, problems: &mut Vec<String>) -> String {
    let Some(rest) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) else {
        return url.to_owned();
    };
    if rest.starts_with(':') || rest.is_empty() {
        return url.to_owned(); // `sqlite::memory:`
    }
    let (path, query) = rest.split_once('?').map_or((rest, None), |(p, q)| (p, Some(q)));
    let path = Path::new(path);
    let full = if path.is_relative() { base.join(path) } else { path.to_owned() };
    if let Some(folder) = full.parent().filter(|f| !f.as_os_str().is_empty() && !f.is_dir()) {
        problems.push(format!(
            "database.url: cannot create the database at {}: the folder {} does not exist; create it or change the path",
            full.display(),
            folder.display()
        ));
    }
    match query {
        Some(q) => format!("sqlite://{}?{q}", full.display()),
        None => format!("sqlite://{}", full.display()),
    }
}

/// The server part of a namespace regex like `@richbot_.*:example\.org`, unescaped; none
/// when the regex does not end in a literal server name.
fn namespace_server(regex: &str) -> Option<String> {
    let tail = regex.trim_end_matches('$').rsplit_once(':')?.1;
    let name = tail.replace('\\', "");
    let literal = !name.is_empty() && !name.contains(['*', '+', '?', '(', ')', '[', ']', '|', '{', '}', '^']);
    (literal && Regex::new(&format!("^{tail}$")).is_ok_and(|re| re.is_match(&name))).then_some(name)
}

fn url_host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p.parse().ok()?),
        _ => (authority, if scheme == "https" { 443 } else { 80 }),
    };
    Some((host.trim_matches(['[', ']']).to_owned(), port))
}

fn same_host(host: &str, listen: SocketAddr) -> bool {
    let loopback = |h: &str| matches!(h, "localhost" | "127.0.0.1" | "::1");
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip == listen.ip()) || (loopback(host) && listen.ip().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_names_its_server() {
        assert_eq!(namespace_server("@richbot_.*:example\\.org").as_deref(), Some("example.org"));
        assert_eq!(namespace_server("@rb_.*:localhost$").as_deref(), Some("localhost"));
        assert_eq!(namespace_server("@rb_.*:.*"), None, "any server: nothing to compare");
    }

    #[test]
    fn urls_give_host_and_port() {
        assert_eq!(url_host_port("http://127.0.0.1:9009"), Some(("127.0.0.1".into(), 9009)));
        assert_eq!(url_host_port("http://[::1]:9009/x"), Some(("::1".into(), 9009)));
        assert_eq!(url_host_port("https://bot.example.org"), Some(("bot.example.org".into(), 443)));
        let listen: SocketAddr = "127.0.0.1:9009".parse().expect("addr");
        assert!(same_host("localhost", listen) && same_host("127.0.0.1", listen) && !same_host("10.0.0.1", listen));
    }

    #[test]
    fn a_relative_database_is_taken_from_the_config_folder_and_a_missing_folder_is_named() {
        let mut problems = Vec::new();
        let url = database("sqlite://richbot.db", Path::new("/etc/richbot"), &mut problems);
        assert_eq!(url, "sqlite:///etc/richbot/richbot.db");
        assert_eq!(database("sqlite::memory:", Path::new("/x"), &mut problems), "sqlite::memory:");
        assert!(problems.iter().any(|p| p.contains("/etc/richbot/richbot.db") && p.contains("folder /etc/richbot")));
    }
}
