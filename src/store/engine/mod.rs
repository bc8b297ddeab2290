//! The database itself, not a table of it: opening one (`open.rs`), flushing its WAL
//! at durability points (`durable.rs`) and checkpointing it (`checkpoint.rs`), the lock
//! that keeps a second process off a SQLite file (`lock.rs`), placeholders as each
//! database binds them (`params.rs`), and copying a whole store into another database
//! (`copy.rs`, `richbot migrate`).

pub(in crate::store) mod checkpoint;
mod copy;
pub(in crate::store) mod durable;
mod lock;
mod open;
pub(in crate::store) mod params;

pub use copy::Table;
pub use lock::{Held, lock_file};
pub use open::file_path;
