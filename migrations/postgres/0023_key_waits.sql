-- Encrypted events whose room key has not arrived yet (they are set aside, processed = 2,
-- so the room goes on). The key's arrival, or the wait running out (wait_until, ms), puts the
-- event back in its room's queue.
CREATE TABLE key_waits (
    event_seq  BIGINT PRIMARY KEY,
    room_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    wait_until BIGINT NOT NULL,
    expired    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX key_waits_session ON key_waits (room_id, session_id);
CREATE INDEX key_waits_until ON key_waits (wait_until);
