-- Tasks and push-notification configs of agentwire-server's PostgresStore.
-- A task is three protobuf blobs (see src/store/sql.rs) plus the columns
-- that listings filter and sort on. Ids sort by byte ("C" collation), as in
-- the other stores, whatever the database's default collation.

CREATE TABLE a2a_tasks (
    id               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    context_id       TEXT COLLATE "C" NOT NULL,
    owner_tenant     TEXT COLLATE "C" NOT NULL,
    owner_principal  TEXT COLLATE "C" NOT NULL,
    -- lf.a2a.v1.TaskState number
    state            INTEGER NOT NULL,
    -- status timestamp in ms since the epoch (0 when the status has none)
    status_millis    BIGINT  NOT NULL,
    has_status_time  BOOLEAN NOT NULL,
    head             BYTEA   NOT NULL,
    history          BYTEA   NOT NULL,
    artifacts        BYTEA   NOT NULL,
    -- incremented by every update (optimistic concurrency between replicas)
    version          BIGINT  NOT NULL DEFAULT 0,
    -- ms since the epoch, by the clock of the replica that wrote
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
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
    seq      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id  TEXT COLLATE "C" NOT NULL,
    id       TEXT COLLATE "C" NOT NULL,
    -- lf.a2a.v1.TaskPushNotificationConfig, protobuf
    config   BYTEA NOT NULL,
    UNIQUE (task_id, id)
);
