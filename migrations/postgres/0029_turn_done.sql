-- A turn's end, in the statement that ends it: when a turn becomes 'done', its events are
-- processed, and the record kept only to resume it (model replies, tool results and
-- starts, which hold model text and tool output) goes. A trigger, so that finishing a
-- turn is one statement, not a transaction of six (each a round trip to the database),
-- and still all or nothing.
CREATE FUNCTION turn_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE events SET processed = 1 WHERE turn_id = NEW.id;
    DELETE FROM turn_replies WHERE turn_id = NEW.id;
    DELETE FROM tool_results WHERE turn_id = NEW.id;
    DELETE FROM tool_starts WHERE turn_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER turn_done AFTER UPDATE OF state ON turns
FOR EACH ROW WHEN (NEW.state = 'done' AND OLD.state <> 'done')
EXECUTE FUNCTION turn_done();
