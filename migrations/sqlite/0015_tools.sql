-- MCP tools. A tool call's result, stored before the model sees it: a resumed turn
-- replays it instead of calling the tool again (a tool may act on the world).
-- `nth` numbers the turn's tool calls from 0 in the order the model made them.
CREATE TABLE tool_results (
    turn_id INTEGER NOT NULL,
    nth     INTEGER NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (turn_id, nth)
);

-- A call that waits for the asker's approval. `notice_event` is the m.notice with the
-- Allow / Deny buttons; the asker's reaction to it decides (`decision`: allow, deny or
-- timeout), once: the first decision stands.
CREATE TABLE approvals (
    id           INTEGER PRIMARY KEY,
    turn_id      INTEGER NOT NULL,
    nth          INTEGER NOT NULL,
    room_id      TEXT NOT NULL,
    asker        TEXT NOT NULL,
    tool         TEXT NOT NULL,
    notice_event TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decision     TEXT,
    decided_by   TEXT,
    UNIQUE (turn_id, nth)
);
CREATE INDEX approvals_notice ON approvals (notice_event) WHERE notice_event IS NOT NULL;
