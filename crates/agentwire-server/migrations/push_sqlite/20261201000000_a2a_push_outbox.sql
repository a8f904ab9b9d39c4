-- The push-notification outbox of agentwire-server's SqliteOutbox
-- (src/push/outbox_sqlite.rs). It may live in the task store's database
-- file: its schema version is kept in its own table (a2a_push_schema), not
-- in the task store's migration table.

-- One stream per (task, config): its delivery state. Only the head of a
-- stream is ever in flight, so the attempt count, the retry time and the
-- lease belong to the stream.
CREATE TABLE a2a_push_streams (
    task_id     TEXT    NOT NULL,
    config_id   TEXT    NOT NULL,
    -- lf.a2a.v1.TaskPushNotificationConfig, protobuf: where and how to send
    config      BLOB    NOT NULL,
    -- sequence number of the next notification enqueued (from 1)
    next_seq    INTEGER NOT NULL DEFAULT 1,
    -- 1 after too many failed attempts: nothing is enqueued until the
    -- config is created again
    failing     INTEGER NOT NULL DEFAULT 0,
    -- failed attempts of the head
    attempts    INTEGER NOT NULL DEFAULT 0,
    -- the head may be tried from this time on (ms since the epoch)
    due_ms      INTEGER NOT NULL DEFAULT 0,
    -- the worker delivering the head, and until when (ms since the epoch)
    lease_owner TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0,
    -- notifications waiting in a2a_push_outbox
    pending     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, config_id)
) WITHOUT ROWID;

-- Leasing: the streams with something to deliver, by due time.
CREATE INDEX a2a_push_streams_due
    ON a2a_push_streams (due_ms) WHERE pending > 0 AND failing = 0;

-- The notifications, in stream order.
CREATE TABLE a2a_push_outbox (
    task_id    TEXT    NOT NULL,
    config_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    -- notification id (X-A2A-Notification-Id), stable across retries
    id         TEXT    NOT NULL,
    -- lf.a2a.v1.StreamResponse, ProtoJSON: the request body
    body       BLOB    NOT NULL,
    -- the event ends the task
    is_final   INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (task_id, config_id, seq)
) WITHOUT ROWID;
