-- One row per LLM turn: created (running) before the first model call, finished with its
-- outcome, rounds and token usage. A running turn found at start-up was cut short by a
-- crash and is resumed with the same id (so its sends reuse their transaction ids).
CREATE TABLE turns (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    room_id           TEXT NOT NULL,
    persona           TEXT NOT NULL,
    asker             TEXT NOT NULL,
    state             TEXT NOT NULL DEFAULT 'running',
    started_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    rounds            INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    outcome           TEXT
);
CREATE INDEX turns_running ON turns (state, room_id);
