//! richbot: a Matrix application service that lets room members talk to an LLM and
//! answers with rich messages (blocks plus a text fallback), posting as virtual users.
//!
//! # The pipeline
//!
//! ```text
//! homeserver --PUT txn--> appservice --> inbox --> room ------> turn ------> agent
//!              (HTTP edge)  (durable)   (triage,   (one LLM    (the bounded
//!                                       per room)   turn)       tool loop)
//!                                                     |   ^         |
//!                                                     |   +- tools -+  (each call: plan,
//!                                                     |      |         sandbox, render;
//!                                                     |      +-> mcp   or an MCP server,
//!                                                     |                 approved first)
//!                                                     v
//!                                  outbox --> matrix --> homeserver
//!                     (every write as a persona, paced, exactly once)
//!   crypto beside the inbox and the outbox: decrypts what comes in, encrypts what goes out
//!   store (SQLite or PostgreSQL) under all of them: the only place that runs SQL
//! ```
//!
//! The agents' channel (`channel`) is a second edge beside the appservice: other agents'
//! sends and edits, checked by the same `plan()`, go out through the same outbox.
//!
//! Encryption is at the two ends (`crypto`): the inbox hands what transactions bring for
//! the personas' devices to their crypto, an encrypted event reaches the room stage as
//! its clear event (`room::decrypt`), and the outbox encrypts a write for an encrypted
//! room just before it goes out. Triggers, context, tools and rendering never know
//! whether a room is encrypted.
//!
//! The modules are declared below in that order, and dependencies point down the list: a
//! module uses only modules declared after it (checked by `tests/it/layout.rs`), so there
//! is no circle. The agent does not know the tools: the turn hands it their specs (the
//! registry's, `tools::registry`) and a runner (`turn::runner`) that sends each call to
//! its feature (`turn::tools`, `turn::media`), each a function of what a call may reach
//! (`turn::reach`), which plans, authorizes, posts or calls it.
//!
//! # Invariants
//!
//! 1. HTTP handlers never call the LLM; they validate, write to the inbox, and answer. A
//!    transaction is answered 200 only after its events are committed, deduplicated by
//!    event id (Synapse restarts its txn ids at 1 after its own restart). The one handler
//!    that calls the homeserver is the user query, which the spec requires to register the
//!    user before answering.
//! 2. Only `store` runs SQL; only `agent::llm` talks to the LLM; only `matrix` talks to the
//!    homeserver; only `mcp` talks to MCP servers.
//! 3. Context building (`turn::context`), triggers (`room::triggers`), tool-call planning
//!    (`tools::plan`), the block catalogue (`blocks`) and rendering (`render`) are pure.
//! 4. Every write has a transaction id fixed before the first attempt and persisted, unique
//!    across personas (`rb.<instance>.<turn>.<seq>`, in `outbox`); a retry or a resumed
//!    turn reuses it.
//! 5. One turn per room at a time, rooms in parallel up to a cap; messages that arrive
//!    during a turn are the next turn's. Among several instances on one PostgreSQL, a room
//!    is worked on only under its lease (`room::leases`), which runs out if its holder dies.
//! 6. Edits only of messages a persona of ours sent (checked in the store), and writes to
//!    one message at least `bot.edit_interval_ms` (default 2.5 s) apart: a too-early edit
//!    waits for a slot reserved atomically in SQL.
//! 7. The sandbox is the asker's: every write lands only in a room the asker is joined to,
//!    reply and thread targets belong to that room, and triggers (reply, reaction,
//!    button) match the room they happen in. A turn answers one asker.
//! 8. Nothing runs unbounded: turns per room and per asker (buckets, then a cool-down),
//!    tokens per asker, room and deployment (reserved before a call, settled after), tool
//!    calls per reply, writes per turn, a deadline per turn, capped retry waits. A limit
//!    that trips says so once, as an `m.notice`; richbot never answers an `m.notice`.
//! 9. Matrix ids are ruma types from the inbox on; a stored id is parsed once, when read.
//! 10. A tool in its server's `approval` list runs only after the asker (no one else)
//!     allows it; an MCP tool's result is recorded before the model sees it, so a resumed
//!     turn never calls it twice. A reply's calls run together only when every one of them
//!     is `concurrent`.
//! 11. A write to an encrypted room is encrypted once, before its first attempt, and its
//!     ciphertext kept: every retry sends the same bytes. A persona's Olm state is
//!     advanced by one holder at a time (a lease among instances) and stored before
//!     anything made with it goes out; what the homeserver pushes for the devices is
//!     stored before the transaction is answered. A room is judged encrypted by its state.

// Commands and set-up.
pub mod runtime;
pub mod deployment;
pub mod register_personas;
pub mod check;
pub mod init;
pub mod migrate;
pub mod reset;
pub mod assemble;
pub mod config;
pub mod registration_file;
// The stages, in pipeline order.
pub mod appservice;
pub mod channel;
pub mod inbox;
pub mod room;
pub mod turn;
pub mod approval;
pub mod schedules;
// What the stages count (by tool name, hence above `tools`).
pub mod metrics;
// What a turn uses.
pub mod tools;
pub mod budget;
pub mod mcp;
pub mod agent;
pub mod polls;
pub mod outbox;
pub mod crypto;
pub mod queue;
// What everything shares: the leaves.
pub mod personas;
pub mod media;
pub mod speech;
pub mod render;
pub mod chart;
pub mod blocks;
pub mod matrix;
pub mod store;
pub mod relation;
pub mod strings;
pub mod mime;
pub mod invisible;
pub mod url_mask;
pub mod pickle;
pub mod private_files;
pub mod clock;
pub mod key_locks;

use std::future::Future;

use tokio::net::TcpListener;

use crate::config::Settings;

pub use assemble::Error;

/// Runs the appservice on `listener` until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    // SQLite: one process per database (a file lock). PostgreSQL: any number of
    // instances (and none while `richbot migrate` copies the database).
    let _lock = store::lock_file(&settings.config.database.url).map_err(Error::Locked)?;
    deployment::Deployment::build(settings).await?.serve(listener, shutdown).await
}
