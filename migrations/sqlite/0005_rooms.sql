-- What we know of rooms: current membership (seeded from the homeserver when a persona
-- joins, then kept up from member events) and each persona's DM with each user.
CREATE TABLE room_members (
    room_id    TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    membership TEXT NOT NULL,
    PRIMARY KEY (room_id, user_id)
);
CREATE TABLE dm_rooms (
    persona TEXT NOT NULL,
    user_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    PRIMARY KEY (persona, user_id)
);
