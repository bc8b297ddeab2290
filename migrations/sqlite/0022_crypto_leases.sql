-- Several instances on one database: only the holder of a persona's crypto lease advances
-- its Olm account and sessions (claimed like a room lease). generation changes with every
-- holder, so an instance that held it before knows its copy in memory is out of date.
CREATE TABLE crypto_leases (
    persona    TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    session    BIGINT,
    expires_at BIGINT NOT NULL,
    generation BIGINT NOT NULL DEFAULT 0
);
