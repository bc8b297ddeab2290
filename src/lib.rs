//! richbot: a Matrix application service that lets room members talk to an LLM.
pub mod blocks;
pub mod tools;
