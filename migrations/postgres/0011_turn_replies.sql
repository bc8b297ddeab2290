-- Record, then act: each model reply of a turn (text and tool calls), stored before its
-- tools run. A resumed turn replays these instead of asking the model again.
CREATE TABLE turn_replies (
    turn_id BIGINT NOT NULL,
    round   BIGINT NOT NULL,
    reply   TEXT NOT NULL,
    PRIMARY KEY (turn_id, round)
);
