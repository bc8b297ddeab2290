-- Who invited each persona into each room it joined: rooms are bounded per inviter
-- (`limits.rooms_per_inviter`), so one member cannot make a persona join without end.
-- Times in ms since the epoch.
CREATE TABLE room_inviters (
    room_id   TEXT NOT NULL,
    persona   TEXT NOT NULL,
    inviter   TEXT NOT NULL,
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (room_id, persona)
);
CREATE INDEX room_inviters_inviter ON room_inviters (inviter);
