-- Task rows that could not be read, set aside by crash recovery: the row
-- as it was in a2a_tasks (its artifact chunks and push configs stay in
-- their tables under its id), why it could not be read, and when it was
-- set aside (ms since the epoch). Nothing reads them but GetTask, which
-- tells the task's owner it is unreadable; an operator inspects or
-- deletes them (docs/operations.md).
CREATE TABLE IF NOT EXISTS a2a_unreadable_tasks (
    id               TEXT    NOT NULL PRIMARY KEY,
    context_id       TEXT    NOT NULL,
    owner_tenant     TEXT    NOT NULL,
    owner_principal  TEXT    NOT NULL,
    -- lf.a2a.v1.TaskState number, as it was
    state            INTEGER NOT NULL,
    head             BLOB    NOT NULL,
    history          BLOB    NOT NULL,
    artifacts        BLOB    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    reason           TEXT    NOT NULL,
    set_aside_at     INTEGER NOT NULL
);
