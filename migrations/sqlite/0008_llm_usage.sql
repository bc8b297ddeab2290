-- LLM token use, one row per model call: reserved (an estimate) before the call, settled
-- with the usage the API reported after it. Budgets are sums over a rolling day, per
-- asker, per room and for the whole deployment, so they survive restarts.
CREATE TABLE llm_usage (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    tokens  INTEGER NOT NULL,
    settled INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX llm_usage_at ON llm_usage (at);
CREATE INDEX llm_usage_user ON llm_usage (user_id, at);
CREATE INDEX llm_usage_room ON llm_usage (room_id, at);
