//! What is done with the model's final answer before a member reads it: reviewed
//! ([`review`]: raw calls, annotations, empty bodies and made-up tool results never
//! posted), calls written as text that nobody asked for kept out ([`unasked`]), and a
//! promise no tool kept ([`promises`]) either kept by the call the model fills in
//! ([`keep`]) or not told. The turn's record (`record`) applies these; calls
//! written as text are read in `agent::written`, and the fill request is
//! `agent::fill`.

pub(super) mod keep;
pub(super) mod promises;
pub(super) mod review;
pub(super) mod unasked;
