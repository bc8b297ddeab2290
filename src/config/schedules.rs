//! `[schedules]`: how many schedules members may keep, how often one may fire, and how
//! late a missed occurrence still fires; with `bot.timezone`, the zone times are written
//! in for members who set none. The key names are a contract; the bounds are checked at
//! start.

use std::time::Duration;

use serde::Deserialize;

use crate::schedules::Bounds;

/// `[schedules]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulesConfig {
    /// Active schedules per member.
    pub per_user: u32,
    /// Active schedules per room.
    pub per_room: u32,
    /// A recurrence fires at most this often.
    pub min_interval_secs: u64,
    /// An occurrence missed while richbot was down still fires this late (marked late);
    /// older ones are skipped.
    pub max_late_secs: u64,
}

impl Default for SchedulesConfig {
    fn default() -> Self {
        let b = Bounds::default();
        Self {
            per_user: b.per_user,
            per_room: b.per_room,
            min_interval_secs: b.min_interval.as_secs(),
            max_late_secs: b.max_late.as_secs(),
        }
    }
}

impl SchedulesConfig {
    /// The bounds as turns and the ticker take them.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            per_user: self.per_user,
            per_room: self.per_room,
            min_interval: Duration::from_secs(self.min_interval_secs),
            max_late: Duration::from_secs(self.max_late_secs),
        }
    }

    /// One line per bound out of range, naming its key (and `bot.timezone`, if unknown).
    pub(super) fn problems(&self, timezone: Option<&str>, problems: &mut Vec<String>) {
        if self.per_user > 1000 {
            problems.push("schedules.per_user: must be 0-1000".to_owned());
        }
        if self.per_room > 10_000 {
            problems.push("schedules.per_room: must be 0-10000".to_owned());
        }
        if !(1..=86_400).contains(&self.min_interval_secs) {
            problems.push("schedules.min_interval_secs: must be 1-86400".to_owned());
        }
        if self.max_late_secs > 7 * 86_400 {
            problems.push("schedules.max_late_secs: must be 0-604800 (a week)".to_owned());
        }
        if let Some(Err(e)) = timezone.map(crate::schedules::when::zone) {
            problems.push(format!("bot.timezone: {e}"));
        }
    }
}
