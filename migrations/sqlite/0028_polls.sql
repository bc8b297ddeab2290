-- The personas' polls (MSC3381): recorded once the start event is sent, so the model can
-- be shown their votes at its next turn in the room, and so the closer ends each at its
-- end_at. The votes themselves are the room's events. claim_until keeps two instances
-- from ending the same poll at once.
CREATE TABLE polls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT NOT NULL UNIQUE,
    room_id     TEXT NOT NULL,
    persona     TEXT NOT NULL,
    question    TEXT NOT NULL,
    answers     TEXT NOT NULL,
    disclosed   INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    end_at      INTEGER,
    ended_at    INTEGER,
    claim_until INTEGER
);
CREATE INDEX polls_room ON polls (room_id, created_at);
CREATE INDEX polls_open ON polls (ended_at, end_at);
