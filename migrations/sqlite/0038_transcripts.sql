-- Members' voice messages, made words by the transcription endpoint: kept with the event
-- so that later turns read the words instead of fetching and transcribing the audio again,
-- shown nowhere else, and deleted when the event is redacted (or pruned with it).
CREATE TABLE transcripts (
    event_id    TEXT PRIMARY KEY,
    room_id     TEXT NOT NULL,
    text        TEXT NOT NULL,
    seconds     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX transcripts_room ON transcripts (room_id);

-- Seconds of members' audio transcribed, for `budget.audio_seconds_per_day` (a rolling
-- day, as `llm_usage`): kept apart from the words, so a redaction scrubs the words but
-- does not give the seconds back.
CREATE TABLE audio_usage (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    seconds INTEGER NOT NULL
);
CREATE INDEX audio_usage_user ON audio_usage (user_id, at);
