-- Pending events only: most events are handled at once (many never need a worker at
-- all), so the index the scheduler and the workers read holds just the few that wait,
-- and storing a handled event costs no entry in it. Events of a turn, for resuming it.
DROP INDEX events_pending;
CREATE INDEX events_pending ON events (room_id, seq) WHERE processed = 0;
CREATE INDEX events_turn ON events (turn_id) WHERE turn_id IS NOT NULL;
-- A user's rooms (shared rooms of a persona and an asker, the persona's rooms at start).
CREATE INDEX room_members_user ON room_members (user_id, membership);
