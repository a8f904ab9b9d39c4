-- ListTasks filtered by state without a context: an owner's tasks in one
-- state, in listing order (most recently updated first), so the page is read
-- from the index instead of filtering the owner's every task.
CREATE INDEX IF NOT EXISTS a2a_tasks_owner_state_time
    ON a2a_tasks (owner_tenant, owner_principal, state, status_millis DESC, id DESC);

-- Crash recovery: the tasks an agent was at work on (submitted = 1,
-- working = 2), read at startup without scanning the finished ones.
CREATE INDEX IF NOT EXISTS a2a_tasks_unfinished
    ON a2a_tasks (updated_at) WHERE state IN (1, 2);

-- ListTasks filtered by context and state: otherwise the planner reads one
-- of the two indexes above and filters the other condition row by row.
CREATE INDEX IF NOT EXISTS a2a_tasks_owner_context_state_time
    ON a2a_tasks (owner_tenant, owner_principal, context_id, state, status_millis DESC, id DESC);
