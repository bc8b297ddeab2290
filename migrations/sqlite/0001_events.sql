-- The inbox and the room history: every event the homeserver pushed, once (event id is
-- the key: Synapse restarts its transaction ids at 1, so they cannot be the dedup key).
-- seq gives the arrival order; processed/turn_id track what the scheduler did with it.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL UNIQUE,
    room_id     TEXT NOT NULL,
    sender      TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    state_key   TEXT,
    origin_ts   INTEGER NOT NULL,
    event       TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    processed   INTEGER NOT NULL DEFAULT 0,
    turn_id     INTEGER
);
CREATE INDEX events_pending ON events (processed, room_id, seq);
CREATE INDEX events_room ON events (room_id, seq);
