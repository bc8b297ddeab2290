-- A turn and the events it answers, claimed in the statement that starts it: `claims` is
-- the JSON array of the events' seq, and this trigger gives them the turn's id. A trigger,
-- so that starting a turn is one statement, not a transaction of four (BEGIN, the
-- INSERT, the UPDATE, COMMIT: each a round trip to the database), and still all or
-- nothing: a crash leaves no turn without its events, nor events claimed by no turn.
ALTER TABLE turns ADD COLUMN claims TEXT;
CREATE TRIGGER turn_claims AFTER INSERT ON turns
WHEN NEW.claims IS NOT NULL
BEGIN
    UPDATE events SET turn_id = NEW.id WHERE seq IN (SELECT value FROM json_each(NEW.claims));
END;
