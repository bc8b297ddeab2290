-- A poll is posted with a message that shows it in every client (its question and
-- numbered answers); text_event_id is that message. A member's reply with a number (to
-- the poll or that message) is a vote, kept here as it arrives: the tally takes each
-- member's latest vote, from these and the poll responses alike.
ALTER TABLE polls ADD COLUMN text_event_id TEXT;
CREATE INDEX polls_text ON polls (text_event_id);

CREATE TABLE poll_replies (
    event_id  TEXT PRIMARY KEY,
    poll_id   INTEGER NOT NULL,
    sender    TEXT NOT NULL,
    origin_ts INTEGER NOT NULL,
    answer    TEXT NOT NULL
);
CREATE INDEX poll_replies_poll ON poll_replies (poll_id, sender, origin_ts);
