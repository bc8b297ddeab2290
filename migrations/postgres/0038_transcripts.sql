-- Members' voice messages, made words by the transcription endpoint: kept with the event
-- so that later turns read the words instead of fetching and transcribing the audio again,
-- shown nowhere else, and deleted when the event is redacted (or pruned with it).
CREATE TABLE transcripts (
    event_id    TEXT PRIMARY KEY,
    room_id     TEXT NOT NULL,
    text        TEXT NOT NULL,
    seconds     BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX transcripts_room ON transcripts (room_id);
