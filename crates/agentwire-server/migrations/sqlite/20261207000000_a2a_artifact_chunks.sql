-- Artifact updates of unfinished tasks, appended instead of rewriting the
-- task's artifacts: a streamed artifact of N chunks costs N small inserts,
-- not N rewrites of everything streamed so far. A row is one artifact
-- update (lf.a2a.v1.TaskArtifactUpdateEvent, protobuf, without task and
-- context ids), written only while the task is not in a terminal state.
-- Reads apply a task's rows, in order, after its artifacts column; when the
-- agent's turn ends, they are folded into that column and deleted.
CREATE TABLE IF NOT EXISTS a2a_artifact_chunks (
    -- write order (within one task, the order the updates were applied)
    seq      INTEGER PRIMARY KEY,
    task_id  TEXT    NOT NULL,
    -- lf.a2a.v1.TaskArtifactUpdateEvent, protobuf
    chunk    BLOB    NOT NULL
);

-- A task's chunks in order.
CREATE INDEX IF NOT EXISTS a2a_artifact_chunks_task
    ON a2a_artifact_chunks (task_id, seq);
