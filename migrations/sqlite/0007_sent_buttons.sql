-- The `send` button ids each persona posted, per room: a message that says it was sent by
-- pressing a button (`<key>.used`) counts as a press only if the persona posted a button
-- with that id in that room; anyone can type the marker by hand.
CREATE TABLE sent_buttons (
    room_id   TEXT NOT NULL,
    sender    TEXT NOT NULL,
    button_id TEXT NOT NULL,
    event_id  TEXT NOT NULL,
    PRIMARY KEY (room_id, sender, button_id)
);
