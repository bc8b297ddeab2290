-- MCP tool calls that started, recorded before the call is made: a call started but with
-- no result in `tool_results` was cut off (a crash, a kill) and its outcome is unknown.
-- A resumed turn never makes it again unasked: a gated call is asked anew, an ungated
-- one is told to the model as of unknown outcome. Times in ms since the epoch.
CREATE TABLE tool_starts (
    turn_id    BIGINT NOT NULL,
    nth        BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    PRIMARY KEY (turn_id, nth)
);
