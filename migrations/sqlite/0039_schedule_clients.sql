-- The agents' client that made a schedule (NULL: a member's, through a turn), so each
-- client has its own bound of schedules (schedules.per_user) instead of sharing its
-- persona's with the other clients, and a schedule whose client is gone from the config
-- or may no longer post in its room is stopped when it comes due. Read from the origin
-- the channel has always written (`agent:<client>:<key>`; a client's name has no colon).
ALTER TABLE schedules ADD COLUMN client TEXT;
UPDATE schedules SET client = substr(origin, 7, instr(substr(origin, 7), ':') - 1)
    WHERE origin LIKE 'agent:%:%';
CREATE INDEX schedules_client ON schedules (client, state);
