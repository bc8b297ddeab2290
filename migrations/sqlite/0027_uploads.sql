-- What a turn uploaded to the media repository as its persona: one row per picture or
-- file (call `nth` of the turn, its `idx`-th upload), made with the mxc:// URL the
-- homeserver reserved before a byte is sent. A resumed turn finds the row and fills the
-- same URL again (if it was not filled yet) instead of uploading twice. It is also the
-- list of what a persona may show: a payload's mxc:// URL must be one of these, or media a
-- member posted in a room the asker is in.
CREATE TABLE uploads (
    turn_id    INTEGER NOT NULL,
    nth        INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    persona    TEXT NOT NULL,
    mxc        TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    uploaded   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (turn_id, nth, idx)
);
CREATE INDEX uploads_mxc ON uploads (mxc);
