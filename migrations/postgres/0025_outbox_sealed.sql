-- A write to an encrypted room is encrypted once, before its first attempt, and the
-- ciphertext kept: a retry sends the same bytes (the room key's message index advances
-- only once). sealed_clear is what it says, for a write found to have landed.
ALTER TABLE outbox ADD COLUMN sealed TEXT;
ALTER TABLE outbox ADD COLUMN sealed_clear TEXT;
