-- Spent budgets already told to members, until they refill: one notice per spent budget,
-- across restarts.
CREATE TABLE budget_notices (
    key   TEXT PRIMARY KEY,
    until BIGINT NOT NULL
);
