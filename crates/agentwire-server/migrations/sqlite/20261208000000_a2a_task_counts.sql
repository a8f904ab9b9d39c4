-- The totals of ListTasks (totalSize) without counting rows: the number of
-- tasks of each owner in each state, and of each owner and context in each
-- state, changed in the same transaction as the task writes that change
-- them. A total is then a few index lookups however many tasks match.
CREATE TABLE IF NOT EXISTS a2a_task_counts (
    owner_tenant     TEXT    NOT NULL,
    owner_principal  TEXT    NOT NULL,
    -- lf.a2a.v1.TaskState number
    state            INTEGER NOT NULL,
    n                INTEGER NOT NULL,
    PRIMARY KEY (owner_tenant, owner_principal, state)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS a2a_context_counts (
    owner_tenant     TEXT    NOT NULL,
    owner_principal  TEXT    NOT NULL,
    context_id       TEXT    NOT NULL,
    state            INTEGER NOT NULL,
    n                INTEGER NOT NULL,
    PRIMARY KEY (owner_tenant, owner_principal, context_id, state)
) WITHOUT ROWID;

-- The tasks stored before this migration.
INSERT INTO a2a_task_counts (owner_tenant, owner_principal, state, n)
    SELECT owner_tenant, owner_principal, state, COUNT(*) FROM a2a_tasks
    GROUP BY owner_tenant, owner_principal, state;
INSERT INTO a2a_context_counts (owner_tenant, owner_principal, context_id, state, n)
    SELECT owner_tenant, owner_principal, context_id, state, COUNT(*) FROM a2a_tasks
    GROUP BY owner_tenant, owner_principal, context_id, state;
