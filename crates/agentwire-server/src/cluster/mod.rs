//! Several replicas: what lets server processes that share one store
//! follow each other's tasks.
//!
//! - `bus`: the [`EventBus`] trait and its notices (public as
//!   [`crate::bus`]): what a task manager needs from the other replicas.
//! - `replicas`: the task manager's side of a bus: ordering the other
//!   replicas' events with its own under each task's order lock,
//!   delivering them to local subscribers, forwarding cancellations, and
//!   failing the tasks of a replica that died.
//! - `postgres`: [`PgEventBus`], the PostgreSQL implementation
//!   (`LISTEN`/`NOTIFY` and reads of the event log), and
//!   [`connect_cluster`] (public in [`crate::store::postgres`]).
//!
//! The event log itself is written by the PostgreSQL task store, in the
//! same statement as each task write (`store/sql/postgres`).
//! `docs/concurrency.md` ("Several replicas") explains the whole.
//!
//! [`EventBus`]: crate::EventBus
//! [`PgEventBus`]: crate::store::PgEventBus
//! [`connect_cluster`]: crate::store::postgres::connect_cluster

pub mod bus;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod replicas;
