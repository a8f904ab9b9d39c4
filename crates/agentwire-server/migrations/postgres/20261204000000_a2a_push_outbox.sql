-- The push-notification outbox of agentwire-server's PostgresOutbox
-- (src/push/outbox_postgres.rs), shared by the replicas of a server: leases
-- keep two replicas from delivering the same stream at once, and a
-- replica that dies leaves its leases to expire.

-- One stream per (task, config): its delivery state. Only the head of a
-- stream is ever in flight, so the attempt count, the retry time and the
-- lease belong to the stream.
CREATE TABLE IF NOT EXISTS a2a_push_streams (
    task_id     TEXT COLLATE "C" NOT NULL,
    config_id   TEXT COLLATE "C" NOT NULL,
    -- lf.a2a.v1.TaskPushNotificationConfig, protobuf: where and how to send
    config      BYTEA   NOT NULL,
    -- sequence number of the next notification enqueued (from 1)
    next_seq    BIGINT  NOT NULL DEFAULT 1,
    -- after too many failed attempts: nothing is enqueued until the config
    -- is created again
    failing     BOOLEAN NOT NULL DEFAULT false,
    -- failed attempts of the head
    attempts    INTEGER NOT NULL DEFAULT 0,
    -- the head may be tried from this time on (ms since the epoch)
    due_ms      BIGINT  NOT NULL DEFAULT 0,
    -- the worker delivering the head, and until when (ms since the epoch)
    lease_owner TEXT    NOT NULL DEFAULT '',
    lease_until BIGINT  NOT NULL DEFAULT 0,
    -- notifications waiting in a2a_push_outbox
    pending     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, config_id)
);

-- Leasing: the streams with something to deliver, by due time.
CREATE INDEX IF NOT EXISTS a2a_push_streams_due
    ON a2a_push_streams (due_ms) WHERE pending > 0 AND NOT failing;

-- The notifications, in stream order.
CREATE TABLE IF NOT EXISTS a2a_push_outbox (
    task_id    TEXT COLLATE "C" NOT NULL,
    config_id  TEXT COLLATE "C" NOT NULL,
    seq        BIGINT  NOT NULL,
    -- notification id (X-A2A-Notification-Id), stable across retries
    id         TEXT    NOT NULL,
    -- lf.a2a.v1.StreamResponse, ProtoJSON: the request body
    body       BYTEA   NOT NULL,
    -- the event ends the task
    is_final   BOOLEAN NOT NULL,
    created_ms BIGINT  NOT NULL,
    PRIMARY KEY (task_id, config_id, seq)
);
