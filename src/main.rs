//! The `richbot` command: `serve`, `generate-registration`, `check`, `blocks check`.
//! The only place `anyhow` is used: each start-up step gets its context here.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use richbot::config::{self, Settings};

#[derive(Parser)]
#[command(name = "richbot", version, about = "A Matrix appservice that answers with rich messages from an LLM")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the appservice.
    Serve {
        /// The TOML configuration file.
        #[arg(long, env = "RICHBOT_CONFIG", default_value = "richbot.toml")]
        config: PathBuf,
    },
    /// Write a registration file (fresh random tokens) to give to the homeserver.
    GenerateRegistration {
        /// Where the homeserver reaches richbot, e.g. http://127.0.0.1:9009.
        #[arg(long)]
        url: String,
        /// The homeserver's server name, e.g. example.org.
        #[arg(long)]
        server_name: String,
        /// Output file.
        #[arg(long, default_value = "registration.yaml")]
        out: PathBuf,
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
    /// Check config, database, homeserver (ping both ways) and LLM; exit 1 if any fails.
    Check {
        #[arg(long, env = "RICHBOT_CONFIG", default_value = "richbot.toml")]
        config: PathBuf,
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
        Command::GenerateRegistration { url, server_name, out, force, id, sender_localpart, user_prefix } => {
            let opts = richbot::registration::Options { url, server_name, id, sender_localpart, user_prefix };
            match richbot::registration::write(&opts, &out, force) {
                Ok(()) => {
                    println!("wrote {}", out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve { config } => report(serve(config)),
        Command::Check { config } => match check(config) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => report(Err(e)),
        },
    }
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
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")
}

fn init_logging(settings: &Settings) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(settings.config.logging.filter.as_deref().unwrap_or("info")))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if settings.config.logging.format.as_deref() == Some("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn serve(path: PathBuf) -> anyhow::Result<()> {
    let settings = load(&path)?;
    init_logging(&settings);
    runtime()?.block_on(async {
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
    })
}

fn check(path: PathBuf) -> anyhow::Result<bool> {
    let settings = match load(&path) {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL config: {e:#}");
            return Ok(false);
        }
    };
    let lines = runtime()?.block_on(richbot::check::run(&settings));
    for l in &lines {
        println!("{l}");
    }
    Ok(lines.iter().all(|l| l.ok))
}

fn blocks_check(file: &str, tool: Option<&str>) -> ExitCode {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(drop)
    } else {
        std::fs::read_to_string(file).map(|t| text = t)
    };
    if let Err(e) = read {
        eprintln!("cannot read {file}: {e}");
        return ExitCode::FAILURE;
    }
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("not JSON: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match tool {
        Some(name) => richbot::tools::plan(name, &value).map(|call| canonical_call(&call)).map_err(|e| e.error),
        None => richbot::blocks::Rich::checked(value).map(|r| r.to_value()).map_err(|e| e.to_string()),
    };
    match result {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn canonical_call(call: &richbot::tools::RichCall) -> serde_json::Value {
    use richbot::tools::{RichCall, RoomTarget};
    let room = |r: &RoomTarget| match r {
        RoomTarget::Here => serde_json::Value::Null,
        RoomTarget::Dm => "dm".into(),
        RoomTarget::Named(n) => n.clone().into(),
    };
    let mut v = match call {
        RichCall::Send { payload, fallback, reply_to, thread, room: r } => serde_json::json!({
            "payload": payload.to_value(), "fallback": fallback, "reply_to": reply_to, "thread": thread, "room": room(r)
        }),
        RichCall::Edit { event_id, payload, fallback, room: r } => serde_json::json!({
            "event_id": event_id, "payload": payload.to_value(), "fallback": fallback, "room": room(r)
        }),
    };
    if let Some(map) = v.as_object_mut() {
        map.retain(|_, x| !x.is_null());
    }
    v
}
