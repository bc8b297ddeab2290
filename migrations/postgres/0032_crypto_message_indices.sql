-- Which event first carried each (megolm session, message index): a member who pastes
-- another's ciphertext into an event of their own sends a used index under a new event
-- id, and that copy is refused. Kept as long as the room history (`bot.history_days`).
CREATE TABLE crypto_message_indices (
    session_id    TEXT NOT NULL,
    message_index BIGINT NOT NULL,
    event_id      TEXT NOT NULL,
    seen_at       BIGINT NOT NULL,
    PRIMARY KEY (session_id, message_index)
);
CREATE INDEX crypto_message_indices_seen ON crypto_message_indices (seen_at);
