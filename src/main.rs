//! The `richbot` command: `init`, `serve`, `check`, `migrate`, `reset-crypto`,
//! `generate-registration`, `generate-pickle-key`, `blocks check`. The only place `anyhow` is used: each start-up step gets its context here.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use richbot::config::{self, Settings};

#[derive(Parser)]
#[command(
    name = "richbot",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("RICHBOT_GIT_COMMIT"), ")"),
    about = "A Matrix appservice that answers with rich messages from an LLM")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a new deployment's richbot.toml and registration.yaml, consistent with each other.
    Init {
        /// The homeserver's client-server URL, e.g. http://127.0.0.1:8008.
        #[arg(long)]
        homeserver: String,
        /// The homeserver's server name (the part after ':' in user ids), e.g. example.org.
        #[arg(long)]
        server_name: String,
        /// Where richbot listens for the homeserver.
        #[arg(long, default_value = "127.0.0.1:9009")]
        listen: String,
        /// The folder to write both files to.
        #[arg(long, default_value = ".")]
        out_dir: PathBuf,
    },
    /// Run the appservice.
    Serve {
        /// The TOML configuration file.
        #[arg(long, env = "RICHBOT_CONFIG", default_value = "richbot.toml")]
        config: PathBuf,
    },
    /// Write a registration file (fresh random tokens) to give to the homeserver: from an
    /// existing config (--config), or from --url and --server-name.
    GenerateRegistration {
        /// Derive url and server name from this config, and write to its appservice.registration.
        #[arg(long, conflicts_with_all = ["url", "server_name"])]
        config: Option<PathBuf>,
        /// Where the homeserver reaches richbot, e.g. http://127.0.0.1:9009.
        #[arg(long, required_unless_present = "config")]
        url: Option<String>,
        /// The homeserver's server name, e.g. example.org.
        #[arg(long, required_unless_present = "config")]
        server_name: Option<String>,
        /// Output file (default: registration.yaml, or the config's appservice.registration).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Overwrite an existing file.
        #[arg(long)]
        force: bool,
        /// The appservice id.
        #[arg(long, default_value = "richbot")]
        id: String,
        /// The localpart of the appservice's own user (the default persona).
        #[arg(long, default_value = "richbot")]
        sender_localpart: String,
        /// Localpart prefix of the persona namespace.
        #[arg(long, default_value = "richbot_")]
        user_prefix: String,
    },
    /// Write a new pickle key (what the personas' crypto secrets are sealed with in the
    /// database), for a deployment from before `init` wrote one; then set
    /// encryption.pickle_key_file to it and restart: the stored state is sealed at start.
    GeneratePickleKey {
        /// The key file to write (never over an existing one).
        #[arg(long, default_value = "pickle.key")]
        out: PathBuf,
    },
    /// Check config, database, homeserver (ping both ways) and LLM; exit 1 if any fails.
    Check {
        #[arg(long, env = "RICHBOT_CONFIG", default_value = "richbot.toml")]
        config: PathBuf,
        /// Also ask each model (a call each) for a rich message, and check its call.
        #[arg(long)]
        model: bool,
    },
    /// Copy a stopped deployment's state into a new, empty database (e.g. SQLite to
    /// PostgreSQL), then check every table's row count on both sides.
    Migrate {
        /// The database richbot used until now, e.g. sqlite://richbot.db.
        #[arg(long)]
        from: String,
        /// The new database, e.g. postgres://richbot:PASSWORD@127.0.0.1/richbot.
        #[arg(long)]
        to: String,
    },
    /// Start a persona's end-to-end encryption over (a new device and identity at the next
    /// start), when its crypto state is lost or broken. Run with richbot serve stopped.
    ResetCrypto {
        #[arg(long, env = "RICHBOT_CONFIG", default_value = "richbot.toml")]
        config: PathBuf,
        /// The persona's localpart.
        #[arg(long)]
        persona: String,
    },
    /// Block payload tools.
    Blocks {
        #[command(subcommand)]
        command: BlocksCommand,
    },
}

#[derive(Subcommand)]
enum BlocksCommand {
    /// Validate a payload (or a tool call's arguments) and print its canonical JSON.
    Check {
        /// A file, or - for standard input.
        #[arg(default_value = "-")]
        file: String,
        /// Treat the input as the arguments of this tool (rich_send or rich_edit).
        #[arg(long)]
        tool: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Blocks { command: BlocksCommand::Check { file, tool } } => blocks_check(&file, tool.as_deref()),
        Command::Init { homeserver, server_name, listen, out_dir } => {
            let opts = richbot::init::Options { homeserver, server_name, listen, out_dir };
            match richbot::init::write(&opts) {
                Ok(paths) => {
                    for p in &paths {
                        println!("wrote {}", p.display());
                    }
                    println!(
                        "next: fill in the [llm] section of {}, add {} to the homeserver's app_service_config_files \
                         and restart it, then run `richbot check --config {0}`",
                        paths[0].display(),
                        paths[1].display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => report(Err(e.into())),
            }
        }
        Command::GenerateRegistration { config, url, server_name, out, force, id, sender_localpart, user_prefix } => {
            let flags = RegistrationFlags { config, url, server_name, out, force, id, sender_localpart, user_prefix };
            report(generate_registration(flags))
        }
        Command::GeneratePickleKey { out } => report(richbot::pickle::write_new(&out).map_err(Into::into).map(|()| {
            println!(
                "wrote {}; set encryption.pickle_key_file to it, back it up apart from the database",
                out.display()
            );
        })),
        Command::Serve { config } => report(serve(config)),
        Command::Migrate { from, to } => report(migrate(&from, &to)),
        Command::ResetCrypto { config, persona } => report(reset_crypto(&config, &persona)),
        Command::Check { config, model } => match check(config, model) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => report(Err(e)),
        },
    }
}

/// `generate-registration`'s flags.
struct RegistrationFlags {
    config: Option<PathBuf>,
    url: Option<String>,
    server_name: Option<String>,
    out: Option<PathBuf>,
    force: bool,
    id: String,
    sender_localpart: String,
    user_prefix: String,
}

/// `generate-registration`, from flags or a config (its listen address, server name, path).
fn generate_registration(flags: RegistrationFlags) -> anyhow::Result<()> {
    let RegistrationFlags { config, url, server_name, out, force, id, sender_localpart, user_prefix } = flags;
    let (opts, default_out) = match config {
        Some(path) => {
            let config = config::read_unchecked(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            let base = richbot::init::registration_options(&config.homeserver.server_name, &config.appservice.listen);
            let target = path.parent().unwrap_or(std::path::Path::new(".")).join(&config.appservice.registration);
            (richbot::registration_file::Options { id, sender_localpart, user_prefix, ..base }, target)
        }
        None => {
            let (url, server_name) = (url.unwrap_or_default(), server_name.unwrap_or_default());
            let opts = richbot::registration_file::Options { url, server_name, id, sender_localpart, user_prefix };
            (opts, PathBuf::from("registration.yaml"))
        }
    };
    let out = out.unwrap_or(default_out);
    richbot::registration_file::write(&opts, &out, force)?;
    println!("wrote {}", out.display());
    Ok(())
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &std::path::Path) -> anyhow::Result<Settings> {
    config::load(path, std::env::vars()).map_err(|e| anyhow::anyhow!("invalid configuration {}:\n{e}", path.display()))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    richbot::runtime::runtime().context("starting the async runtime")
}

fn serve(path: PathBuf) -> anyhow::Result<()> {
    let settings = load(&path)?;
    richbot::runtime::init_logging(&settings);
    for w in &settings.warnings {
        tracing::warn!("{w}");
    }
    let runtime = runtime()?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("listening on {}", settings.listen))?;
        let shutdown = async {
            let ctrl_c = tokio::signal::ctrl_c();
            #[cfg(unix)]
            {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing a SIGTERM handler");
                tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
            }
            #[cfg(not(unix))]
            let _ = ctrl_c.await;
            tracing::info!("shutting down");
        };
        richbot::run(settings, listener, shutdown).await.context("running the appservice")
    });
    // A blocking thread that never ends (work that cannot be cancelled) must not keep the
    // process from exiting: everything that matters was settled inside `run`.
    runtime.shutdown_timeout(BLOCKING_GRACE);
    served
}

/// How long an exiting `serve` waits for blocking threads still running.
const BLOCKING_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn migrate(from: &str, to: &str) -> anyhow::Result<()> {
    let copied = runtime()?.block_on(richbot::migrate::run(from, to))?;
    let (from, to) = (richbot::store::shown_url(from), richbot::store::shown_url(to));
    for c in &copied {
        println!("{:<16} {:>10} rows", c.table, c.rows);
    }
    let rows: i64 = copied.iter().map(|c| c.rows).sum();
    println!("copied {} tables, {rows} rows, from {from} to {to}; counts match", copied.len());
    println!("next: set database.url to {to} and start richbot");
    Ok(())
}

fn reset_crypto(path: &std::path::Path, persona: &str) -> anyhow::Result<()> {
    let settings = load(path)?;
    println!("{}", runtime()?.block_on(richbot::reset::run(&settings, persona))?);
    Ok(())
}

fn check(path: PathBuf, models: bool) -> anyhow::Result<bool> {
    let settings = match load(&path) {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL config: {e:#}");
            return Ok(false);
        }
    };
    for w in &settings.warnings {
        println!("WARN config: {w}");
    }
    let lines = runtime()?.block_on(richbot::check::run(&settings, models));
    for l in &lines {
        println!("{l}");
    }
    Ok(lines.iter().all(|l| l.ok))
}

fn blocks_check(file: &str, tool: Option<&str>) -> ExitCode {
    let mut text = String::new();
    let read = match file {
        "-" => std::io::stdin().read_to_string(&mut text).map(drop),
        _ => std::fs::read_to_string(file).map(|t| text = t),
    };
    let result =
        read.map_err(|e| format!("cannot read {file}: {e}")).and_then(|()| richbot::tools::check_text(&text, tool));
    match result {
        Ok(canonical) => {
            println!("{canonical}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
