-- How many of a schedule's occurrences in a row failed to be posted: at a few, the
-- schedule is stopped and its asker told, instead of failing again at every occurrence.
ALTER TABLE schedules ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
