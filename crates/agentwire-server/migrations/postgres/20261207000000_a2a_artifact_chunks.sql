-- Artifact updates of unfinished tasks, appended instead of rewriting the
-- task's artifacts: a streamed artifact of N chunks costs N small inserts,
-- not N rewrites of everything streamed so far. A row is one artifact
-- update (lf.a2a.v1.TaskArtifactUpdateEvent, protobuf, without task and
-- context ids), written only while the task is not in a terminal state,
-- holding the task's row lock. Reads apply a task's rows, in order, after
-- its artifacts column; when the agent's turn ends, they are folded into
-- that column and deleted.
CREATE TABLE IF NOT EXISTS a2a_artifact_chunks (
    -- write order (within one task, the order the updates were applied:
    -- each is numbered while it holds the task's row lock)
    seq      BIGINT GENERATED ALWAYS AS IDENTITY,
    task_id  TEXT COLLATE "C" NOT NULL,
    -- lf.a2a.v1.TaskArtifactUpdateEvent, protobuf
    chunk    BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
