-- A turn that only posts a notice (a rate limit tripped, the bot was away, `!usage`)
-- records the notice and the outcome it ends with before posting, so a crash mid-post
-- resumes by posting that notice (under the same transaction id), never by asking the model.
ALTER TABLE turns ADD COLUMN notice TEXT;
ALTER TABLE turns ADD COLUMN notice_outcome TEXT;
