-- Schedules: a message or a prompt for later, once (at_ms) or by an RFC 5545 rule
-- (rrule, from start_ms, in the zone tz). next_at is the next occurrence still to fire
-- (NULL once there is none). An occurrence fires by becoming an inbox event whose id is
-- the schedule's and the occurrence's, so two instances, or a restart between the event
-- and the move of next_at, fire it once. origin is what created the schedule (a turn's
-- call, an agent's idempotency key): the same origin makes no second schedule.
CREATE TABLE schedules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    origin      TEXT NOT NULL UNIQUE,
    room_id     TEXT NOT NULL,
    persona     TEXT NOT NULL,
    asker       TEXT NOT NULL,
    title       TEXT,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    at_ms       INTEGER,
    rrule       TEXT,
    tz          TEXT NOT NULL,
    start_ms    INTEGER,
    next_at     INTEGER,
    state       TEXT NOT NULL,
    fired       INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    ended_why   TEXT
);
CREATE INDEX schedules_due ON schedules (state, next_at);
CREATE INDEX schedules_asker ON schedules (asker, state);
CREATE INDEX schedules_room ON schedules (room_id, state);

-- A member's own settings: their time zone (`!timezone`), told to the model and used for
-- the times richbot writes them.
CREATE TABLE user_settings (
    user_id  TEXT PRIMARY KEY,
    timezone TEXT
);
