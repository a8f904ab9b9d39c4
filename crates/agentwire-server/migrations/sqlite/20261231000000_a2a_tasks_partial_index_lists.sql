-- The conditions of the partial indexes on terminal and on open tasks as
-- two lists of two states each: SQLite evaluates a list of more than two
-- constants (`state IN (3, 4, 5, 7)`) by building a temporary B-tree of it
-- at every insert and update of a task row, the largest single cost of a
-- new task (see `Dialect::TERMINAL` in src/store/sql/lite.rs). The
-- statements that read these indexes repeat the conditions to the letter.
DROP INDEX IF EXISTS a2a_tasks_terminal_updated;
CREATE INDEX a2a_tasks_terminal_updated
    ON a2a_tasks (updated_at) WHERE (state IN (3, 4) OR state IN (5, 7));
DROP INDEX IF EXISTS a2a_tasks_open;
CREATE INDEX a2a_tasks_open
    ON a2a_tasks (state, owner_tenant, owner_principal, id) WHERE (state IN (1, 2) OR state IN (6, 8));
-- Crash recovery (`state IN (1, 2)`, implying the open tasks' condition)
-- now reads a2a_tasks_open, which holds the unfinished tasks and the
-- interrupted ones: the index kept for it alone is one fewer to write.
DROP INDEX IF EXISTS a2a_tasks_unfinished;
