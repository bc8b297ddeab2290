//! The integration tests again, on PostgreSQL: every module of `tests/it` that keeps state
//! (the store, the pipeline, end to end against Synapse), each test on a fresh database of
//! a real PostgreSQL server the harness starts (`support/postgres.rs`). The modules are
//! `tests/it`'s own files; `tests/it/layout.rs` checks that none that touches the
//! database is left out.

// Some helpers serve only the modules that need no database.
#[allow(dead_code)]
#[path = "../it/support/mod.rs"]
mod support;

#[path = "../it/approvals.rs"]
mod approvals;
#[path = "../it/e2e_agent_schedules.rs"]
mod e2e_agent_schedules;
#[path = "../it/e2e_agents.rs"]
mod e2e_agents;
#[path = "../it/e2e_any_client.rs"]
mod e2e_any_client;
#[path = "../it/e2e_appservice.rs"]
mod e2e_appservice;
#[path = "../it/e2e_commands.rs"]
mod e2e_commands;
#[path = "../it/e2e_crash.rs"]
mod e2e_crash;
#[path = "../it/e2e_delivery.rs"]
mod e2e_delivery;
#[path = "../it/e2e_encrypted.rs"]
mod e2e_encrypted;
#[path = "../it/e2e_flood.rs"]
mod e2e_flood;
#[path = "../it/e2e_hostile.rs"]
mod e2e_hostile;
#[path = "../it/e2e_hostile_crypto.rs"]
mod e2e_hostile_crypto;
#[path = "../it/e2e_downgrade.rs"]
mod e2e_downgrade;
#[path = "../it/e2e_keys.rs"]
mod e2e_keys;
#[path = "../it/e2e_live.rs"]
mod e2e_live;
#[path = "../it/e2e_media.rs"]
mod e2e_media;
#[path = "../it/e2e_model_output.rs"]
mod e2e_model_output;
#[path = "../it/e2e_models.rs"]
mod e2e_models;
#[path = "../it/e2e_pictures.rs"]
mod e2e_pictures;
#[path = "../it/e2e_polls.rs"]
mod e2e_polls;
#[path = "../it/e2e_rooms.rs"]
mod e2e_rooms;
#[path = "../it/e2e_safety.rs"]
mod e2e_safety;
#[path = "../it/e2e_schedules.rs"]
mod e2e_schedules;
#[path = "../it/e2e_shutdown.rs"]
mod e2e_shutdown;
#[path = "../it/e2e_tools.rs"]
mod e2e_tools;
#[path = "../it/e2e_turn.rs"]
mod e2e_turn;
#[path = "../it/e2e_uploads.rs"]
mod e2e_uploads;
#[path = "../it/e2e_written.rs"]
mod e2e_written;
#[path = "../it/edge.rs"]
mod edge;
#[path = "../it/leases.rs"]
mod leases;
#[path = "../it/matrix_retry.rs"]
mod matrix_retry;
#[path = "../it/migrate.rs"]
mod migrate;
#[path = "../it/retention.rs"]
mod retention;
#[path = "../it/pickle_key.rs"]
mod pickle_key;
#[path = "../it/pipeline.rs"]
mod pipeline;
#[path = "../it/safety.rs"]
mod safety;
#[path = "../it/e2e_voice.rs"]
mod e2e_voice;
#[path = "../it/speech.rs"]
mod speech;
#[path = "../it/store.rs"]
mod store;
#[path = "../it/store_hostile.rs"]
mod store_hostile;

mod encrypted;
mod instances;
mod proxy;
mod serving;
