-- The agents' channel's idempotency ledger: one row per writing call of an agent client
-- (a send or an edit), made before anything is sent. A call with an idempotency key finds
-- the row its first call made (UNIQUE (client, idem_key); rows without a key never
-- collide) and returns its receipt instead of posting again. The row's write goes through
-- the outbox as turn -id, so its transaction id is fixed with the row.
CREATE TABLE agent_requests (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    client       TEXT NOT NULL,
    idem_key     TEXT,
    request_hash TEXT NOT NULL,
    room_id      TEXT,
    message_id   TEXT,
    event_id     TEXT,
    created_at   INTEGER NOT NULL,
    UNIQUE (client, idem_key)
);
CREATE INDEX agent_requests_created ON agent_requests (created_at);
-- Which agent client sent a message (NULL: the model, or richbot itself): a client edits
-- only its own, and a reply to one is the client's to read, not a question for the model.
ALTER TABLE sent_messages ADD COLUMN client TEXT;
