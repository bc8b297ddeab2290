//! The ticker: fires due occurrences until the process stops. It sleeps until the next
//! schedule is due (at most [`LOOK_EVERY`], so schedules another instance made are found),
//! woken early when a schedule is made here. For each due schedule it decides (`due`),
//! puts the occurrence to fire in the room's inbox (once: its event id is the
//! occurrence's), queues the room, and moves the schedule on. Any instance may do this
//! for any schedule: the inbox takes the event once, and the move is a compare-and-set.
//!
//! Whether the asker may still have it (in the room, allowed) is the room stage's to
//! decide when it handles the occurrence, with the membership it keeps.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;

use super::due::due;
use super::{Bounds, EVENT_TYPE, body_of, event_id, occurrence, when_of};
use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::queue::RoomQueue;
use crate::store::{NewEvent, ScheduleRow, Store};

/// The ticker sleeps at most this long between looks.
const LOOK_EVERY: Duration = Duration::from_secs(30);

/// Wakes the ticker when a schedule is made in this process.
#[derive(Debug, Clone, Default)]
pub struct Ticker {
    wake: Arc<Notify>,
}

impl Ticker {
    /// A schedule was made: look again now.
    pub fn made(&self) {
        self.wake.notify_one();
    }

    /// Fires due occurrences until the process stops.
    pub async fn run(self, store: Store, queue: Arc<RoomQueue>, bounds: Bounds, metrics: Arc<Metrics>) {
        loop {
            let now = now_ms();
            match store.due_schedules(now).await {
                Ok(rows) => {
                    for row in rows {
                        if let Err(e) = tick(&store, &queue, &bounds, &metrics, &row, now).await {
                            tracing::warn!(schedule = row.id, error = %e, "could not fire a schedule; trying again");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the schedules due; trying later"),
            }
            if let Ok(n) = store.count_active_schedules().await {
                metrics.schedules_active.store(u64::try_from(n).unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
            }
            let next = store.next_schedule_at().await.ok().flatten();
            // A failed fire is tried again after a pause, not in a busy loop.
            let wait = crate::clock::sleep_for(next, LOOK_EVERY, Duration::from_millis(200));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
            }
        }
    }
}

/// Handles one due schedule.
async fn tick(
    store: &Store,
    queue: &RoomQueue,
    bounds: &Bounds,
    metrics: &Metrics,
    row: &ScheduleRow,
    now: i64,
) -> Result<(), crate::store::Error> {
    let (Some(when), Some(body), Some(next_at)) = (when_of(row), body_of(row), row.next_at) else {
        tracing::warn!(schedule = row.id, "a schedule that cannot be read; stopped");
        store.end_schedule(row.id, "stopped", "unreadable", now).await?;
        return Ok(());
    };
    let max_late = crate::clock::ms(bounds.max_late);
    let d = super::off_workers(move || due(&when, next_at, now, max_late)).await;
    if let Some((at, late)) = d.fire {
        let id = event_id(row.id, at);
        let content = occurrence(row.id, at, late, row.title.as_deref(), &body);
        let event = json!({
            "event_id": id, "room_id": row.room_id, "sender": row.asker, "type": EVENT_TYPE,
            "origin_server_ts": at, "content": content,
        });
        let new = NewEvent {
            event_id: id,
            room_id: row.room_id.clone(),
            sender: row.asker.clone(),
            event_type: EVENT_TYPE.to_owned(),
            state_key: None,
            origin_ts: at,
            event: event.to_string(),
            processed: false,
        };
        if store.insert_events(&[new], now).await? == 1 {
            Metrics::inc(&metrics.schedules_fired);
            if late {
                Metrics::inc(&metrics.schedules_late);
            }
            tracing::info!(schedule = row.id, room = %row.room_id, due = at, late, "schedule fired");
        }
        queue.push([row.room_id.clone()]);
    }
    let moved = store.advance_schedule(row.id, next_at, d.start, d.next, d.fire.is_some(), now).await?;
    if moved && d.skipped > 0 {
        Metrics::add(&metrics.schedules_skipped, d.skipped);
        tracing::warn!(
            schedule = row.id,
            skipped = d.skipped,
            "missed occurrences skipped (later than schedules.max_late_secs)"
        );
    }
    Ok(())
}
