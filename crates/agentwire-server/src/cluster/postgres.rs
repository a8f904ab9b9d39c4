//! [`PgEventBus`]: the replicas of a server sharing one PostgreSQL database
//! follow each other's tasks through the event log of [`PostgresStore`]
//! and `LISTEN`/`NOTIFY`.

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, StreamResponse};
use async_trait::async_trait;
use prost::Message as _;
use sqlx::postgres::{PgListener, PgNotification};

use crate::bus::{EventBus, Notice, NoticeSender, Notices, RemoteEvent, notice_channel};
use crate::store::postgres::{
    CANCEL_CHANNEL, EVENTS_CHANNEL, MAX_PAYLOAD, PUSH_CONFIGS_CHANNEL, PostgresStore, db_error,
};
use crate::store::{StoredTask, sql};

/// Notices queued for the task manager before they are replaced by one
/// resynchronisation.
const NOTICE_CAPACITY: usize = 4096;
/// Longest wait between two attempts to reconnect the listener.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The [`EventBus`] of replicas sharing a [`PostgresStore`] with an event
/// log: one `LISTEN` connection per task manager (channels `a2a_events` and
/// `a2a_cancel`), reconnected with backoff whenever it fails (the task
/// manager then catches up from the log, so nothing announced meanwhile is
/// lost); reads of the log on the store's pool; and a periodic purge of
/// the log's old events.
///
/// ```no_run
/// use agentwire_server::A2aServer;
/// use agentwire_server::store::postgres::connect_cluster;
/// # use agentwire_types::AgentCard;
/// # struct Agent;
/// # impl agentwire_server::AgentExecutor for Agent {
/// #     async fn execute(&self, _: agentwire_server::RequestContext, t: agentwire_server::TaskUpdater)
/// #         -> agentwire_server::A2aResult<()> { t.complete().await }
/// # }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let replica = agentwire_server::bus::new_replica_id();
/// let (store, bus) = connect_cluster("postgres://a2a:secret@127.0.0.1:5432/a2a", &replica).await?;
/// A2aServer::new(AgentCard::new("Agent", "Does things", "1.0.0"), Agent)
///     .store(store)
///     .bus(bus)
///     .serve("127.0.0.1:8080")
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgEventBus {
    store: PostgresStore,
    replica_id: Arc<str>,
    retention: Duration,
    purge_every: Duration,
    heartbeat_every: Duration,
    replica_timeout: Duration,
}

/// Connects to the database at `url` (see [`PostgresStore::connect`]) and
/// returns a store that logs its events under `replica_id` and the bus
/// that reads them, ready for [`crate::A2aServer::store`] and
/// [`crate::A2aServer::bus`]. Every replica sharing the database needs its
/// own `replica_id` ([`crate::bus::new_replica_id`] makes one).
pub async fn connect_cluster(
    url: &str,
    replica_id: &str,
) -> A2aResult<(Arc<PostgresStore>, Arc<PgEventBus>)> {
    let store = PostgresStore::connect(url)
        .await?
        .with_event_log(replica_id)?;
    let bus = PgEventBus::new(&store)?;
    Ok((Arc::new(store), Arc::new(bus)))
}

impl PgEventBus {
    /// The bus of a store built [`PostgresStore::with_event_log`] (an error
    /// otherwise), with its replica id.
    pub fn new(store: &PostgresStore) -> A2aResult<Self> {
        let Some(replica_id) = store.log.clone() else {
            return Err(A2aError::internal(
                "PgEventBus needs a PostgresStore with an event log (PostgresStore::with_event_log)",
            ));
        };
        Ok(Self {
            store: store.clone(),
            replica_id,
            retention: Duration::from_secs(600),
            purge_every: Duration::from_secs(60),
            heartbeat_every: Duration::from_secs(5),
            replica_timeout: Duration::from_secs(30),
        })
    }

    /// How long logged events are kept (default 10 minutes). A replica
    /// that falls further behind than this (a `LISTEN` connection down for
    /// longer) may miss events for its subscribers.
    pub fn event_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How often this replica announces itself (default every 5 s) and
    /// after how long without an announcement another replica counts as
    /// gone (default 30 s): its working tasks are then failed, since their
    /// agent went with it. The timeout must be well above the interval.
    pub fn liveness(mut self, heartbeat_every: Duration, replica_timeout: Duration) -> Self {
        self.heartbeat_every = heartbeat_every.max(Duration::from_millis(10));
        self.replica_timeout = replica_timeout.max(self.heartbeat_every * 2);
        self
    }

    /// How often the log is purged (default every minute).
    pub fn purge_interval(mut self, every: Duration) -> Self {
        self.purge_every = every.max(Duration::from_millis(10));
        self
    }
}

#[async_trait]
impl EventBus for PgEventBus {
    fn replica_id(&self) -> &str {
        &self.replica_id
    }

    fn listen(&self) -> Notices {
        let (tx, rx) = notice_channel(NOTICE_CAPACITY);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(listen(
                    self.store.clone(),
                    Arc::clone(&self.replica_id),
                    tx.clone(),
                ));
                rt.spawn(purge(
                    self.store.clone(),
                    self.retention,
                    self.purge_every,
                    tx.clone(),
                ));
                rt.spawn(watch(
                    self.store.clone(),
                    Arc::clone(&self.replica_id),
                    self.heartbeat_every,
                    self.replica_timeout,
                    tx,
                ));
            }
            Err(_) => tracing::error!(
                "event bus: no tokio runtime to listen on; other replicas' events will not be seen"
            ),
        }
        rx
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        upto: Option<i64>,
        limit: usize,
    ) -> A2aResult<Vec<RemoteEvent>> {
        let what = || format!("reading the logged events of task {task_id}");
        let rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "SELECT seq, event FROM a2a_task_events \
             WHERE task_id = $1 AND seq > $2 AND seq <= $3 AND origin <> $4 \
             ORDER BY seq LIMIT $5",
        )
        .bind(task_id)
        .bind(after)
        .bind(upto.unwrap_or(i64::MAX))
        .bind(&*self.replica_id)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.store.pool())
        .await
        .map_err(|e| db_error(&what(), e))?;
        Ok(rows
            .into_iter()
            .map(|(seq, bytes)| RemoteEvent {
                seq,
                event: match StreamResponse::decode(bytes.as_slice()) {
                    Ok(event) => Some(Arc::new(event)),
                    Err(e) => {
                        tracing::error!(task = %task_id, seq, error = %e, "event bus: a logged event cannot be decoded; skipped");
                        None
                    }
                },
            })
            .collect())
    }

    async fn snapshot(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<(StoredTask, i64)>> {
        // One statement reads from one snapshot of the database: the task
        // and the position of its last event agree.
        let what = || format!("reading task {task_id}");
        // (The task's artifact chunks come with it: see `store/sql`.)
        let rows = sqlx::query(
            "SELECT 0 AS seq, owner_tenant, owner_principal, head, history, artifacts, \
             (SELECT COALESCE(max(e.seq), 0) FROM a2a_task_events e WHERE e.task_id = $1) \
             AS last_seq FROM a2a_tasks WHERE id = $1 \
             UNION ALL SELECT seq, NULL, NULL, NULL, NULL, chunk, NULL \
             FROM a2a_artifact_chunks WHERE task_id = $1",
        )
        .bind(task_id)
        .fetch_all(self.store.pool())
        .await
        .map_err(|e| db_error(&what(), e))?;
        let Some((stored, row)) = sql::task_from_rows(&rows, task_id, history_length)? else {
            return Ok(None);
        };
        let seq: i64 = sqlx::Row::try_get(row, "last_seq").map_err(|e| db_error(&what(), e))?;
        Ok(Some((stored, seq)))
    }

    async fn request_cancel(&self, task_id: &str) -> A2aResult<()> {
        self.notify(CANCEL_CHANNEL, task_id, "the cancellation")
            .await
    }

    async fn announce_push_configs(&self, task_id: &str) -> A2aResult<()> {
        self.notify(PUSH_CONFIGS_CHANNEL, task_id, "the push configs")
            .await
    }
}

impl PgEventBus {
    /// `NOTIFY channel, task_id`; `what` names it in errors.
    async fn notify(&self, channel: &str, task_id: &str, what: &str) -> A2aResult<()> {
        if task_id.len() > MAX_PAYLOAD {
            return Err(A2aError::internal(format!(
                "task id too long to announce {what}"
            )));
        }
        sqlx::query("SELECT pg_notify($1, $2)::text")
            .bind(channel)
            .bind(task_id)
            .execute(self.store.pool())
            .await
            .map_err(|e| db_error(&format!("announcing {what} of task {task_id}"), e))?;
        Ok(())
    }
}

/// Sleeps, unless the receiver goes away first (false then).
async fn pause(tx: &NoticeSender, d: Duration) -> bool {
    tokio::select! {
        () = tx.closed() => false,
        () = tokio::time::sleep(d) => true,
    }
}

async fn connect(store: &PostgresStore) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(store.pool()).await?;
    listener
        .listen_all([EVENTS_CHANNEL, CANCEL_CHANNEL, PUSH_CONFIGS_CHANNEL])
        .await?;
    Ok(listener)
}

/// The listening task: forwards the other replicas' notifications until
/// the receiver or the pool goes away; reconnects with backoff, announcing
/// a resynchronisation after each (re)connection.
async fn listen(store: PostgresStore, me: Arc<str>, tx: NoticeSender) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if store.pool().is_closed() || tx.is_closed() {
            return;
        }
        let connected = tokio::select! {
            () = tx.closed() => return,
            r = connect(&store) => r,
        };
        let mut listener = match connected {
            Ok(l) => l,
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "event bus: cannot listen to PostgreSQL");
                if !pause(&tx, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        tracing::debug!(replica = %me, "event bus: listening");
        backoff = Duration::from_millis(100);
        // Anything announced before now is in the log: catch up from it.
        if !tx.send(Notice::Resync) {
            return;
        }
        loop {
            let received = tokio::select! {
                () = tx.closed() => return,
                r = listener.try_recv() => r,
            };
            match received {
                Ok(Some(n)) => {
                    if let Some(notice) = parse(&n, &me) {
                        if !tx.send(notice) {
                            return;
                        }
                    }
                }
                // The connection was lost and made again: notifications
                // may have been missed.
                Ok(None) => {
                    tracing::warn!("event bus: the PostgreSQL connection was lost; reconnected");
                    if !tx.send(Notice::Resync) {
                        return;
                    }
                }
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "event bus: listening failed; reconnecting");
                    break;
                }
            }
        }
        drop(listener);
        if !pause(&tx, backoff).await {
            return;
        }
    }
}

/// The notice of a notification (`None` for this replica's own events and
/// for payloads that are not ours).
fn parse(n: &PgNotification, me: &str) -> Option<Notice> {
    let payload = n.payload();
    match n.channel() {
        EVENTS_CHANNEL => {
            // "task_id seq origin": the id may hold blanks, the others not.
            let mut it = payload.rsplitn(3, ' ');
            let (origin, seq, task_id) = (it.next()?, it.next()?, it.next()?);
            if origin == me {
                return None;
            }
            let Ok(seq) = seq.parse() else {
                tracing::debug!(payload, "event bus: unexpected notification");
                return None;
            };
            Some(Notice::Event {
                task_id: task_id.to_owned(),
                seq,
            })
        }
        CANCEL_CHANNEL if !payload.is_empty() => Some(Notice::Cancel {
            task_id: payload.to_owned(),
        }),
        PUSH_CONFIGS_CHANNEL if !payload.is_empty() => Some(Notice::PushConfigs {
            task_id: payload.to_owned(),
        }),
        _ => None,
    }
}

/// The periodic purge of old logged events (every replica runs it; the
/// deletions skip rows another replica is deleting).
async fn purge(store: PostgresStore, retention: Duration, every: Duration, tx: NoticeSender) {
    loop {
        if !pause(&tx, every).await || store.pool().is_closed() {
            return;
        }
        match store.purge_events_older_than(retention).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(events = n, "event bus: purged old events"),
            Err(e) => tracing::warn!(error = %e, "event bus: purging old events failed"),
        }
    }
}

/// Announces this replica, and reports the working tasks whose last event
/// came from a replica that stopped announcing itself (their agent is gone).
/// Every replica runs it; failing a task twice is refused by the state
/// machine, so races between replicas are harmless.
async fn watch(
    store: PostgresStore,
    me: Arc<str>,
    every: Duration,
    timeout: Duration,
    tx: NoticeSender,
) {
    loop {
        if store.pool().is_closed() {
            return;
        }
        let now = crate::store::sql::now_millis();
        let beat = sqlx::query(
            "INSERT INTO a2a_replicas (id, heartbeat) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET heartbeat = EXCLUDED.heartbeat",
        )
        .bind(me.as_ref())
        .bind(now)
        .execute(store.pool())
        .await;
        if let Err(e) = beat {
            tracing::warn!(error = %e, "event bus: cannot announce this replica");
        } else {
            let cutoff = now.saturating_sub(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
            let orphans = sqlx::query_scalar::<_, String>(
                // The replica that last wrote the task is silent, and so is
                // the task (a write within the timeout proves its writer
                // was alive then, even before its first announcement). The
                // writer is on the row; rows written before that column
                // existed fall back to their last logged event.
                "SELECT t.id FROM a2a_tasks t \
                 CROSS JOIN LATERAL (SELECT COALESCE(t.writer, (SELECT e.origin \
                   FROM a2a_task_events e WHERE e.task_id = t.id \
                   ORDER BY e.seq DESC LIMIT 1)) AS origin) w \
                 WHERE t.state IN (1, 2) AND w.origin <> $1 AND t.updated_at < $2 \
                   AND NOT EXISTS (SELECT 1 FROM a2a_replicas r \
                     WHERE r.id = w.origin AND r.heartbeat >= $2) \
                 LIMIT 100",
            )
            .bind(me.as_ref())
            .bind(cutoff)
            .fetch_all(store.pool())
            .await;
            match orphans {
                Ok(ids) => {
                    for task_id in ids {
                        tx.send(Notice::Orphaned { task_id });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "event bus: cannot look for orphaned tasks"),
            }
        }
        if !pause(&tx, every).await {
            return;
        }
    }
}
