-- The counters of tasks by owner and state are split into rows by shard:
-- each batch of writes updates the rows of one shard, so that concurrent
-- batches (of one replica or several) do not all wait for the same row.
-- A listing's total adds the shards up. Replicas upgrade together: an
-- earlier version's upsert names the old primary key.
ALTER TABLE a2a_task_counts ADD COLUMN IF NOT EXISTS shard INTEGER NOT NULL DEFAULT 0;
ALTER TABLE a2a_task_counts DROP CONSTRAINT IF EXISTS a2a_task_counts_pkey;
ALTER TABLE a2a_task_counts ADD PRIMARY KEY (owner_tenant, owner_principal, state, shard);
