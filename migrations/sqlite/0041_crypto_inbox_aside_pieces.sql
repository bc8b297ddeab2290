-- A crypto inbox row that keeps failing is taken apart: its to-device messages one by
-- one, so only the message that fails is set aside, not the room keys other members sent
-- in the same transaction. One row may then leave several pieces here, so the table is
-- keyed by an id of its own; seq still names the inbox row each piece came from.
-- (id last, as PostgreSQL's added column is: `richbot migrate` copies between the two.)
CREATE TABLE crypto_inbox_aside_pieces (
    seq          INTEGER NOT NULL,
    persona      TEXT NOT NULL,
    body         TEXT NOT NULL,
    received_at  BIGINT NOT NULL,
    set_aside_at BIGINT NOT NULL,
    error        TEXT NOT NULL,
    id           INTEGER PRIMARY KEY AUTOINCREMENT
);
INSERT INTO crypto_inbox_aside_pieces (seq, persona, body, received_at, set_aside_at, error)
    SELECT seq, persona, body, received_at, set_aside_at, error FROM crypto_inbox_aside ORDER BY seq;
DROP TABLE crypto_inbox_aside;
ALTER TABLE crypto_inbox_aside_pieces RENAME TO crypto_inbox_aside;
CREATE INDEX crypto_inbox_aside_persona ON crypto_inbox_aside (persona, id);
