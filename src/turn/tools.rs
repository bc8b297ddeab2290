//! The tools a turn runs, one file per feature (rich messages, polls, schedules, MCP
//! tools), and the approval an MCP tool may need first. Each is a function of the
//! turn's `reach::Reach` (the store, the outbox, the turn's scope and write count), called
//! by `runner::Runner::dispatch`.
//!
//! Where each feature's other pieces are (a newcomer changing one starts here):
//! - **Polls** ([`polls`]): the tools' specs and checks in `tools::poll`; votes
//!   read by the room stage in `room::votes`; tallies and the closer that ends a
//!   poll on time in `polls`; the message drawn for clients without polls in
//!   `render::polls`; the rows in `store::polls`.
//! - **Schedules** ([`schedules`] makes, lists and cancels them; [`scheduled`] posts an
//!   occurrence when it is due): the tools' specs, checks and times in
//!   `schedules` (`call`, `when`, `delay`, `due`, `ticker`); the room stage's
//!   `!schedules` commands in `room::schedule_commands` and its due occurrences in
//!   `room::{scheduler, occurrences}`; `[schedules]` in `config::schedules`;
//!   the rows in `store::schedules`; other agents' schedules in
//!   `channel::schedules`.
//! - **MCP tools** ([`mcp`]): the servers and their listings in `mcp`, the
//!   registry that offers them in `tools::registry`, `[mcp]` in
//!   `config::mcp`.
//! - **Rich messages** ([`rich`], sent where [`targets`] allows: the asker's rooms): the
//!   specs and `plan` in `tools`, rendering in `render`, the block catalogue in `blocks`.
//! - **Approvals** ([`approval_notice`] posts and closes the notice; [`shown`] is what it
//!   shows): the door that reads the asker's reaction in `approval`, the rows in
//!   `store::approvals`.

pub(super) mod approval_notice;
pub(super) mod mcp;
pub(super) mod polls;
pub(super) mod rich;
pub(super) mod scheduled;
pub(super) mod schedules;
pub(super) mod shown;
pub(super) mod targets;
