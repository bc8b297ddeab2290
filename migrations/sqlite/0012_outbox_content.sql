-- What each write is: a send or an edit, and a hash of its content. A replayed write whose
-- content differs from what was first claimed under its id is refused, never sent.
ALTER TABLE outbox ADD COLUMN kind TEXT;
ALTER TABLE outbox ADD COLUMN content_hash TEXT;
