//! The integration tests, as one binary so `support` compiles once: the block catalogue,
//! `plan`, the CLI, the store, the HTTP edge, the homeserver client, the pipeline against a
//! stand-in homeserver, and end to end against a real Synapse (`e2e_*`).

mod support;

mod agents;
// The Qwen lane is the suite's longest test (a real model on one thread, minutes); named
// so that libtest, which starts tests in name order, starts it among the first and the
// rest of the suite runs beside it, instead of its being the run's tail.
mod ai_qwen;
mod approvals;
mod blocks;
mod cli;
mod docs;
mod e2e_agent_schedules;
mod e2e_agents;
mod e2e_any_client;
mod e2e_appservice;
mod e2e_commands;
mod e2e_crash;
mod e2e_delivery;
mod e2e_downgrade;
mod e2e_encrypted;
mod e2e_flood;
mod e2e_hostile;
mod e2e_hostile_crypto;
mod e2e_keys;
mod e2e_live;
mod e2e_media;
mod e2e_llama;
mod e2e_model_output;
mod e2e_models;
mod e2e_pictures;
mod e2e_polls;
mod e2e_rooms;
mod e2e_schedules;
mod e2e_safety;
mod e2e_shutdown;
mod e2e_tools;
mod e2e_turn;
mod e2e_uploads;
mod e2e_voice;
mod e2e_written;
mod layout;
mod leases;
mod edge;
mod first_run;
mod matrix_retry;
mod migrate;
mod mcp;
mod outbox_flush;
mod outbox_pace;
mod pipeline;
mod packaging;
mod pickle_key;
mod plan;
mod rendering;
mod retention;
mod safety;
mod speech;
mod store;
mod store_hostile;
