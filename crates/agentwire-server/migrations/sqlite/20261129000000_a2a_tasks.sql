-- Tasks and push-notification configs of agentwire-server's SqliteStore.
-- A task is three protobuf blobs (see src/store/sql.rs) plus the columns
-- that listings filter and sort on.

CREATE TABLE a2a_tasks (
    id               TEXT    NOT NULL PRIMARY KEY,
    context_id       TEXT    NOT NULL,
    owner_tenant     TEXT    NOT NULL,
    owner_principal  TEXT    NOT NULL,
    -- lf.a2a.v1.TaskState number
    state            INTEGER NOT NULL,
    -- status timestamp in ms since the epoch (0 when the status has none)
    status_millis    INTEGER NOT NULL,
    has_status_time  INTEGER NOT NULL,
    head             BLOB    NOT NULL,
    history          BLOB    NOT NULL,
    artifacts        BLOB    NOT NULL,
    -- incremented by every update (optimistic concurrency)
    version          INTEGER NOT NULL DEFAULT 0,
    -- ms since the epoch, by the store's clock
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- ListTasks: an owner's tasks, most recently updated first.
CREATE INDEX a2a_tasks_owner_time
    ON a2a_tasks (owner_tenant, owner_principal, status_millis DESC, id DESC);

-- ListTasks filtered by context.
CREATE INDEX a2a_tasks_owner_context_time
    ON a2a_tasks (owner_tenant, owner_principal, context_id, status_millis DESC, id DESC);

-- Retention: terminal tasks by age (terminal states: completed, failed,
-- canceled, rejected).
CREATE INDEX a2a_tasks_terminal_updated
    ON a2a_tasks (updated_at) WHERE state IN (3, 4, 5, 7);

CREATE TABLE a2a_push_configs (
    -- insertion order: listings return configs in the order they were added
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id  TEXT NOT NULL,
    id       TEXT NOT NULL,
    -- lf.a2a.v1.TaskPushNotificationConfig, protobuf
    config   BLOB NOT NULL,
    UNIQUE (task_id, id)
);
