-- Each persona's end-to-end encryption state (its Olm account and device, its
-- cross-signing keys, the Olm and Megolm sessions, what it knows of other users' devices),
-- as the crypto library's store asks for it. Kept here, in richbot's own database, so it is
-- backed up with the rest and shared by every instance. Values are the library's pickles as
-- JSON text; the other columns are what it looks them up by. One persona's rows never
-- serve another (every key starts with the persona).

-- Single values: the account, the private cross-signing identity, the device id, backup
-- and bookkeeping values, and the rarer kinds under a kind prefix.
CREATE TABLE crypto_kv (
    persona TEXT NOT NULL,
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (persona, key)
);
-- Olm sessions (one-to-one channels with other devices), found by the other's key.
CREATE TABLE crypto_olm_sessions (
    persona    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sender_key TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (persona, session_id)
);
CREATE INDEX crypto_olm_sessions_sender ON crypto_olm_sessions (persona, sender_key);
-- Megolm room keys received (and the persona's own), by room and by sending device.
CREATE TABLE crypto_group_sessions (
    persona          TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    room_id          TEXT NOT NULL,
    sender_key       TEXT NOT NULL,
    sender_data_type BIGINT NOT NULL,
    backed_up        BIGINT NOT NULL DEFAULT 0,
    value            TEXT NOT NULL,
    PRIMARY KEY (persona, session_id)
);
CREATE INDEX crypto_group_sessions_room ON crypto_group_sessions (persona, room_id);
CREATE INDEX crypto_group_sessions_device ON crypto_group_sessions (persona, sender_key, sender_data_type, session_id);
-- The persona's current outgoing Megolm session per room.
CREATE TABLE crypto_outbound_sessions (
    persona TEXT NOT NULL,
    room_id TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (persona, room_id)
);
-- Other users' devices and cross-signing identities, as keys queries returned them.
CREATE TABLE crypto_devices (
    persona   TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    device_id TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (persona, user_id, device_id)
);
CREATE TABLE crypto_identities (
    persona TEXT NOT NULL,
    user_id TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (persona, user_id)
);
-- Users whose devices the persona follows, and whether their list is out of date.
CREATE TABLE crypto_tracked_users (
    persona TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dirty   BIGINT NOT NULL,
    PRIMARY KEY (persona, user_id)
);
-- Hashes of Olm messages already decrypted (a replayed one is refused).
CREATE TABLE crypto_olm_hashes (
    persona TEXT NOT NULL,
    hash    TEXT NOT NULL,
    PRIMARY KEY (persona, hash)
);
