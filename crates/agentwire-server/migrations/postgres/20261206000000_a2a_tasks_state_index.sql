-- ListTasks filtered by state without a context: an owner's tasks in one
-- state, in listing order (most recently updated first), so the page is read
-- from the index instead of filtering the owner's every task. (Crash
-- recovery's index, a2a_tasks_unfinished, came with the writer column.)
CREATE INDEX IF NOT EXISTS a2a_tasks_owner_state_time
    ON a2a_tasks (owner_tenant, owner_principal, state, status_millis DESC, id DESC);

-- ListTasks filtered by context and state: otherwise the planner reads one
-- of the two indexes above and filters the other condition row by row.
CREATE INDEX IF NOT EXISTS a2a_tasks_owner_context_state_time
    ON a2a_tasks (owner_tenant, owner_principal, context_id, state, status_millis DESC, id DESC);
