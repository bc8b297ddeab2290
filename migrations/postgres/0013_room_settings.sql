-- Per-room conversation settings members change with commands: how answers are placed in a
-- group room (`!mode thread|reply|flat`), and where the model's context starts (`!reset`:
-- events at or before reset_seq stay stored but are no longer in the prompt).
CREATE TABLE room_settings (
    room_id   TEXT PRIMARY KEY,
    mode      TEXT,
    reset_seq BIGINT NOT NULL DEFAULT 0
);
