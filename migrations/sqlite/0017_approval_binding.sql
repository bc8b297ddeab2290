-- An approval is bound to one run of one call, as shown: `shown_hash` is the SHA-256 of
-- the notice's text (a decision holds only for exactly that), `used_at` is when the
-- approved call started (a decision is spent by one run), and `attempt` numbers the asks
-- of one call: a call whose approved run was cut off by a crash is asked again, never
-- run again on the old decision. SQLite cannot change a table's UNIQUE constraint, so the
-- table is built anew (new columns last, in PostgreSQL's order).
CREATE TABLE approvals_bound (
    id           INTEGER PRIMARY KEY,
    turn_id      INTEGER NOT NULL,
    nth          INTEGER NOT NULL,
    room_id      TEXT NOT NULL,
    asker        TEXT NOT NULL,
    tool         TEXT NOT NULL,
    notice_event TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decision     TEXT,
    decided_by   TEXT,
    attempt      INTEGER NOT NULL DEFAULT 0,
    shown_hash   TEXT,
    used_at      INTEGER,
    UNIQUE (turn_id, nth, attempt)
);
INSERT INTO approvals_bound (id, turn_id, nth, room_id, asker, tool, notice_event, created_at, expires_at, decision, decided_by)
    SELECT id, turn_id, nth, room_id, asker, tool, notice_event, created_at, expires_at, decision, decided_by FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_bound RENAME TO approvals;
CREATE INDEX approvals_notice ON approvals (notice_event) WHERE notice_event IS NOT NULL;
