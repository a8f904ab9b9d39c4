-- The replica that last wrote each task (set when the event log is on).
-- A working task whose writer stopped announcing itself lost its agent;
-- the writer on the row finds it even after its logged events were purged.
ALTER TABLE a2a_tasks ADD COLUMN IF NOT EXISTS writer TEXT COLLATE "C";

CREATE INDEX IF NOT EXISTS a2a_tasks_unfinished
    ON a2a_tasks (updated_at) WHERE state IN (1, 2);
