-- An approval is bound to one run of one call, as shown: `shown_hash` is the SHA-256 of
-- the notice's text (a decision holds only for exactly that), `used_at` is when the
-- approved call started (a decision is spent by one run), and `attempt` numbers the asks
-- of one call: a call whose approved run was cut off by a crash is asked again, never
-- run again on the old decision.
ALTER TABLE approvals
    ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN shown_hash TEXT,
    ADD COLUMN used_at BIGINT;
ALTER TABLE approvals DROP CONSTRAINT approvals_turn_id_nth_key;
ALTER TABLE approvals ADD CONSTRAINT approvals_turn_nth_attempt UNIQUE (turn_id, nth, attempt);
