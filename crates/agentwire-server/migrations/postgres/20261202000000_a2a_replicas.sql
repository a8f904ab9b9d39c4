-- Replicas sharing the database announce themselves here; a task whose
-- last event came from a replica that stopped announcing itself lost its
-- agent, and the other replicas fail it.
CREATE TABLE IF NOT EXISTS a2a_replicas (
    id TEXT COLLATE "C" PRIMARY KEY,
    heartbeat BIGINT NOT NULL
);
