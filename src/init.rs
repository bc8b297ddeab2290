//! `richbot init`: one source of truth for a new deployment. From a few flags it writes
//! both files a deployment needs, consistent with each other: `richbot.toml` (homeserver,
//! listen address, database, a persona, an `[llm]` section to fill in) and the
//! `registration.yaml` to give the homeserver, whose url, sender and user namespace are
//! derived from the same values, with fresh tokens; and `pickle.key`, the key the personas'
//! crypto secrets are sealed with in the database (`crate::pickle`). All three are 0600
//! and none is ever overwritten; nothing is written unless all can be.

use std::path::{Path, PathBuf};

use crate::private_files;
use crate::registration_file;

/// What `init` is told.
#[derive(Debug, Clone)]
pub struct Options {
    /// The homeserver's client-server URL, e.g. `http://127.0.0.1:8008`.
    pub homeserver: String,
    /// The homeserver's server name, e.g. `example.org`.
    pub server_name: String,
    /// Where richbot listens for the homeserver, e.g. `127.0.0.1:9009`.
    pub listen: String,
    /// The folder both files go to.
    pub out_dir: PathBuf,
}

pub const CONFIG_FILE: &str = "richbot.toml";
pub const REGISTRATION_FILE: &str = "registration.yaml";
pub const PICKLE_KEY_FILE: &str = "pickle.key";

/// The URL the homeserver reaches richbot at, for a listen address (a wildcard address is
/// reached on loopback).
pub fn url_for(listen: &str) -> String {
    let listen = listen.replace("0.0.0.0:", "127.0.0.1:").replace("[::]:", "[::1]:");
    format!("http://{listen}")
}

/// The registration options that match a deployment's values.
pub fn registration_options(server_name: &str, listen: &str) -> registration_file::Options {
    registration_file::Options {
        url: url_for(listen),
        server_name: server_name.to_owned(),
        id: "richbot".to_owned(),
        sender_localpart: "richbot".to_owned(),
        user_prefix: "richbot_".to_owned(),
    }
}

fn config_text(o: &Options) -> String {
    format!(
        "# Written by `richbot init`. Fill in the [llm] section, then run `richbot check` and\n\
         # `richbot serve`. Relative paths are taken from this file's folder. Every key can be\n\
         # overridden from the environment (RICHBOT__SECTION__KEY); see richbot.example.toml.\n\n\
         [homeserver]\nurl = {hs:?}\nserver_name = {server:?}\n\n\
         [appservice]\nregistration = {reg:?}           # give this file to the homeserver\nlisten = {listen:?}\n\n\
         [database]\nurl = \"sqlite://richbot.db\"\n\n\
         [llm]\nbase_url = \"http://127.0.0.1:8080/v1\"       # any OpenAI-compatible API, including /v1\nmodel = \"gpt-4o-mini\"\n\
         # api_key = \"...\"                          # or api_key_file = \"...\", or OPENAI_API_KEY\n\n\
         [encryption]\n\
         # Encrypted rooms (Element's DMs) are read and answered. The registration beside this\n\
         # file has what that needs; Synapse needs in homeserver.yaml (see docs/admin/encryption.md):\n\
         #   experimental_features:\n\
         #     msc3202_transaction_extensions: true\n\
         #     msc2409_to_device_messages_enabled: true\n\
         enabled = true\n\
         # What the personas' crypto secrets are sealed with in the database. Back this file up\n\
         # apart from the database: without it their encryption starts over (reset-crypto).\n\
         pickle_key_file = {key:?}\n\n\
         [[personas]]\nlocalpart = \"richbot\"\ndisplay_name = \"Richbot\"\n",
        hs = o.homeserver,
        server = o.server_name,
        reg = REGISTRATION_FILE,
        key = PICKLE_KEY_FILE,
        listen = o.listen,
    )
}

/// Writes `richbot.toml`, `registration.yaml` and `pickle.key` into `opts.out_dir`;
/// returns their paths.
pub fn write(opts: &Options) -> Result<Vec<PathBuf>, registration_file::Error> {
    let config = opts.out_dir.join(CONFIG_FILE);
    let registration = opts.out_dir.join(REGISTRATION_FILE);
    let key = opts.out_dir.join(PICKLE_KEY_FILE);
    for path in [&config, &registration, &key] {
        if private_files::exists(path) {
            return Err(private_files::Error::Exists(path.display().to_string()).into());
        }
    }
    registration_file::check(&registration_options(&opts.server_name, &opts.listen))?;
    if !(opts.homeserver.starts_with("http://") || opts.homeserver.starts_with("https://"))
        || opts.homeserver.contains(['"', '\\', '\n'])
    {
        return Err(registration_file::Error::Invalid("--homeserver: must be an http(s) URL".to_owned()));
    }
    std::fs::create_dir_all(&opts.out_dir)
        .map_err(|source| private_files::Error::Write { path: opts.out_dir.display().to_string(), source })?;
    registration_file::write(&registration_options(&opts.server_name, &opts.listen), &registration, false)?;
    crate::pickle::write_new(&key)?;
    private_files::write_private(&config, &config_text(opts), false)?;
    Ok(vec![config, registration, key])
}

/// Whether `dir` holds files `init` would refuse to overwrite.
pub fn would_collide(dir: &Path) -> bool {
    [CONFIG_FILE, REGISTRATION_FILE, PICKLE_KEY_FILE].iter().any(|f| private_files::exists(&dir.join(f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> Options {
        Options {
            homeserver: "http://127.0.0.1:8008".into(),
            server_name: "example.org".into(),
            listen: "0.0.0.0:9009".into(),
            out_dir: dir.to_owned(),
        }
    }

    #[test]
    fn init_writes_a_config_a_registration_and_a_pickle_key_that_validate_together() {
        let dir = tempfile::tempdir().expect("tempdir");
        let written = write(&opts(dir.path())).expect("written");
        assert_eq!(written.len(), 3);
        let settings = crate::config::load(&written[0], std::iter::empty()).expect("the three validate");
        assert_eq!(settings.registration.url.as_deref(), Some("http://127.0.0.1:9009"));
        assert_eq!(settings.config.homeserver.server_name, "example.org");
        assert!(settings.pickle_key.is_some(), "the config names the key written beside it");
        assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
        assert!(written.iter().all(|f| !private_files::readable_by_others(f)));
        assert!(would_collide(dir.path()));
        assert!(
            matches!(write(&opts(dir.path())), Err(registration_file::Error::File(private_files::Error::Exists(_)))),
            "never overwrites"
        );
    }

    #[test]
    fn a_server_name_that_is_not_one_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        for bad in ["exa'mple.org", "example.org:", "example.org:99999x", "ex ample.org", "", "[::1", "a/b"] {
            let o = Options { server_name: bad.into(), ..opts(dir.path()) };
            match write(&o) {
                Err(registration_file::Error::Invalid(why)) => assert!(why.contains("--server-name"), "{bad}: {why}"),
                other => panic!("{bad}: {other:?}"),
            }
            assert!(!would_collide(dir.path()), "{bad}: nothing written");
        }
        for good in ["example.org", "localhost:8448", "127.0.0.1", "[::1]:8448", "matrix-1.example.org"] {
            assert!(registration_file::is_server_name(good), "{good}");
        }
    }
}
