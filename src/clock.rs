//! Wall-clock time in milliseconds since the epoch: what Matrix timestamps and the edit
//! pace (shared through the database) are measured in.

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
