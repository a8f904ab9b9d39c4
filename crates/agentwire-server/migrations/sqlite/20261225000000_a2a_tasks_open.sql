-- The open tasks (submitted = 1, working = 2, input-required = 6,
-- auth-required = 8) with their owners: read at start-up to count each
-- caller's open tasks again (the bound on open tasks per caller), from this
-- index alone (it holds the open tasks only), without scanning the
-- finished ones.
CREATE INDEX IF NOT EXISTS a2a_tasks_open
    ON a2a_tasks (state, owner_tenant, owner_principal, id) WHERE state IN (1, 2, 6, 8);
