-- The event log of agentwire-server's PostgresStore (when built with an event
-- log, for several replicas): the StreamResponse of every task write, in
-- the order the writes were applied, so that a replica can deliver to its
-- subscribers the events another replica applied. A row is written in the
-- same statement as the task write it records, and announced with
-- NOTIFY a2a_events 'task_id seq origin'. Rows are transient: they are
-- needed for seconds (until every replica has fetched them) and purged by
-- age and with their task.

CREATE TABLE a2a_task_events (
    -- write order; within one task, the order the writes were applied
    -- (they hold the task's row lock)
    seq         BIGSERIAL PRIMARY KEY,
    task_id     TEXT COLLATE "C" NOT NULL,
    -- the replica that wrote it
    origin      TEXT NOT NULL,
    -- lf.a2a.v1.StreamResponse, protobuf
    event       BYTEA NOT NULL,
    -- ms since the epoch, by the clock of the replica that wrote
    created_at  BIGINT NOT NULL
);

-- Events of a task after a position.
CREATE INDEX a2a_task_events_task_seq ON a2a_task_events (task_id, seq);

-- Purge by age.
CREATE INDEX a2a_task_events_created ON a2a_task_events (created_at);
