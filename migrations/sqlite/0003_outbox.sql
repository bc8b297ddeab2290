-- Every write to the homeserver that posts or edits a message, with its transaction id
-- fixed before the first attempt. (turn_id, seq) identifies the n-th write of a turn, so a
-- resumed turn finds what it already sent instead of posting it twice.
CREATE TABLE outbox (
    txn_id     TEXT PRIMARY KEY,
    turn_id    INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    room_id    TEXT NOT NULL,
    sender     TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending',
    event_id   TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0,
    error      TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (turn_id, seq)
);
