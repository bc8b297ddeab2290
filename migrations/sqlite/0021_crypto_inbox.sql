-- What the homeserver pushed for the personas' devices (to-device messages such as room
-- keys, device list changes, one-time key counts), stored before the transaction is
-- answered: the homeserver does not send a to-device message twice. Handed to the
-- persona's crypto in order, then deleted.
CREATE TABLE crypto_inbox (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    persona     TEXT NOT NULL,
    body        TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX crypto_inbox_persona ON crypto_inbox (persona, seq);
