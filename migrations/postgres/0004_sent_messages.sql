-- Messages a persona sent: the ownership record for edits and the edit pace. next_edit_at
-- is the earliest time (ms) the next write to the message may happen; a writer reserves
-- its slot by moving it forward atomically. Edits are recorded too, with `replaces` naming
-- the original, so an edit of an edit can be aimed at the original.
CREATE TABLE sent_messages (
    event_id     TEXT PRIMARY KEY,
    room_id      TEXT NOT NULL,
    sender       TEXT NOT NULL,
    thread_root  TEXT,
    replaces     TEXT,
    content      TEXT NOT NULL,
    sent_at      BIGINT NOT NULL,
    next_edit_at BIGINT NOT NULL,
    edits        BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sent_messages_thread ON sent_messages (room_id, thread_root);
