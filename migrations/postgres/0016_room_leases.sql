-- Which instance handles a room now (several instances on one PostgreSQL; on SQLite the one
-- process holds every lease it takes). A lease is claimed atomically (a conditional upsert:
-- free, expired, or already the claimer's), renewed while its holder works, deleted when
-- the step ends, and simply expires when its holder dies, so another instance takes the
-- room over. On PostgreSQL `session` is the backend of the holder's `serve` lock
-- connection: once PostgreSQL has no such backend (the process died and the kernel closed
-- its connections), the lease is over at once. Times in ms since the epoch.
CREATE TABLE room_leases (
    room_id    TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    session    BIGINT,
    expires_at BIGINT NOT NULL
);
CREATE INDEX room_leases_holder ON room_leases (holder);
