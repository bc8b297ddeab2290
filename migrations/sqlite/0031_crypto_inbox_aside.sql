-- A crypto inbox row the persona's crypto keeps failing on (a stranger's to-device message
-- the store cannot hold, a library error) must not block every row behind it: each failed
-- attempt is counted, and after a few the row is moved here, out of the way, kept for the
-- admin to look at (capped per persona).
ALTER TABLE crypto_inbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
CREATE TABLE crypto_inbox_aside (
    seq          INTEGER PRIMARY KEY,
    persona      TEXT NOT NULL,
    body         TEXT NOT NULL,
    received_at  BIGINT NOT NULL,
    set_aside_at BIGINT NOT NULL,
    error        TEXT NOT NULL
);
CREATE INDEX crypto_inbox_aside_persona ON crypto_inbox_aside (persona, seq);
