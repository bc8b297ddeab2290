-- Facts about this installation: its random instance id (part of every send transaction
-- id, so a fresh database never reuses an id the homeserver still remembers) and which
-- personas are registered.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE personas (
    user_id       TEXT PRIMARY KEY,
    registered_at BIGINT NOT NULL
);
