-- Whether a room is encrypted, from its state (an invite's stripped state, an
-- m.room.encryption state event, or the homeserver asked once), with the settings the
-- room key follows and who may read it (history visibility). algorithm is empty for a room
-- known to be unencrypted, NULL while not known; encryption, once on, stays on.
-- undecryptable_told_at: when the room was last told that a message could not be read
-- (at most once an hour).
CREATE TABLE room_encryption (
    room_id               TEXT PRIMARY KEY,
    algorithm             TEXT,
    rotation_period_ms    BIGINT,
    rotation_period_msgs  BIGINT,
    history_visibility    TEXT,
    undecryptable_told_at BIGINT
);
