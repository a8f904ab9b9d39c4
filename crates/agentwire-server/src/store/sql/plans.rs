//! The query plans of the store's statements: every query shape the store
//! runs on `a2a_tasks` is answered from an index (no scan of the whole
//! table, no sort of the owner's tasks), so its cost does not grow with the
//! number of stored tasks. SQLite's plans are checked on every test run
//! (`EXPLAIN QUERY PLAN`); PostgreSQL's (`EXPLAIN`) need a database and are
//! ignored without one.

use agentwire_types::{TaskState, Timestamp};

use super::driver::{Dialect, Stmt};
use super::{
    Cursor, GET_TASK, Owner, READ_FOR_UPDATE, TaskQuery, UNFINISHED, count_query, open_task_owners,
    page_query, purge_query,
};

/// A query shape, the statements it runs and the index each must use.
struct Shape {
    name: &'static str,
    query: TaskQuery,
    /// The index the page (and its count) must be read from.
    index: &'static str,
}

fn owner() -> Owner {
    Owner {
        tenant: "tenant".into(),
        principal: "alice".into(),
    }
}

fn cursor() -> Option<Cursor> {
    Some(Cursor {
        millis: 1_700_000_000_000,
        id: "t-500".into(),
    })
}

/// The listings of ListTasks: by owner, owner and state, owner and
/// context, owner, context and state; each also with a time filter and a
/// cursor (a page after the first).
fn listing_shapes() -> Vec<Shape> {
    let base = TaskQuery {
        page_size: 50,
        ..Default::default()
    };
    let after = Some(Timestamp::from_millis(1_600_000_000_000));
    let mut shapes = Vec::new();
    for (name, context, state, index) in [
        ("owner", None, None, "a2a_tasks_owner_time"),
        (
            "owner+state",
            None,
            Some(TaskState::Working),
            "a2a_tasks_owner_state_time",
        ),
        (
            "owner+context",
            Some("ctx"),
            None,
            "a2a_tasks_owner_context_time",
        ),
        (
            "owner+context+state",
            Some("ctx"),
            Some(TaskState::Completed),
            "a2a_tasks_owner_context_state_time",
        ),
    ] {
        let q = TaskQuery {
            context_id: context.map(String::from),
            state,
            ..base.clone()
        };
        shapes.push(Shape {
            name,
            query: q.clone(),
            index,
        });
        shapes.push(Shape {
            name,
            query: TaskQuery {
                status_after: after,
                cursor: cursor(),
                history_length: Some(0),
                include_artifacts: true,
                ..q
            },
            index,
        });
    }
    shapes
}

/// Owner-only listings with only a time filter or only a cursor.
fn extra_shapes() -> Vec<Shape> {
    vec![
        Shape {
            name: "owner+time",
            query: TaskQuery {
                page_size: 10,
                status_after: Some(Timestamp::from_millis(1_600_000_000_000)),
                ..Default::default()
            },
            index: "a2a_tasks_owner_time",
        },
        Shape {
            name: "owner+cursor",
            query: TaskQuery {
                page_size: 10,
                cursor: cursor(),
                ..Default::default()
            },
            index: "a2a_tasks_owner_time",
        },
    ]
}

/// The statements of the other reads: a task by id (read and read for an
/// update), crash recovery, and the purge, with the index each must use.
/// `recovery`: the index crash recovery reads (SQLite: the open tasks'
/// index, whose condition its own implies, see the migration
/// `20261231000000_a2a_tasks_partial_index_lists.sql`).
fn point_statements<'a, D: Dialect>(
    purge: &'a str,
    recovery: &'static str,
) -> Vec<(&'static str, Stmt<'a>, &'static str)> {
    vec![
        ("task by id", Stmt::new(GET_TASK).arg("t-1"), "pkey"),
        (
            "task for update",
            Stmt::new(READ_FOR_UPDATE).arg("t-1"),
            "pkey",
        ),
        ("crash recovery", Stmt::new(UNFINISHED), recovery),
        (
            "open tasks at start-up",
            Stmt::new(open_task_owners::<D>()),
            "a2a_tasks_open",
        ),
        (
            "purge",
            Stmt::new(purge).arg(1_700_000_000_000_i64).arg(500_i64),
            "a2a_tasks_terminal_updated",
        ),
    ]
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use crate::store::sql::lite::{Lite, prepared};

    /// A database in memory with the store's schema and a few rows (the
    /// plans do not depend on them: SQLite plans from the schema, as the
    /// store never runs `ANALYZE`).
    fn db() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().expect("open SQLite in memory");
        crate::store::sql::sqlite::create_schema(&conn).expect("the store's schema");
        conn
    }

    /// The plan of a statement: one line per step ("SEARCH a2a_tasks USING
    /// INDEX ...").
    fn plan(conn: &rusqlite::Connection, s: &Stmt<'_>) -> Vec<String> {
        let explain = Stmt::new(format!("EXPLAIN QUERY PLAN {}", s.sql()));
        let mut explain = explain;
        for a in s.args() {
            explain = explain.arg(*a);
        }
        let mut st = prepared(conn, &explain).expect("prepare EXPLAIN QUERY PLAN");
        let mut rows = st.raw_query();
        let mut lines = Vec::new();
        while let Some(row) = rows.next().expect("read the plan") {
            lines.push(row.get::<_, String>(3).expect("the plan's detail"));
        }
        lines
    }

    /// Every step on `a2a_tasks` searches an index (or scans a partial
    /// one), one of them the index `index` (`pkey`: the primary key, `None`:
    /// any); nothing is sorted afterwards.
    fn assert_indexed(name: &str, lines: &[String], index: Option<&str>) {
        let on_tasks: Vec<&String> = lines.iter().filter(|l| l.contains("a2a_tasks")).collect();
        assert!(
            !on_tasks.is_empty(),
            "{name}: no step on a2a_tasks: {lines:?}"
        );
        for l in &on_tasks {
            let partial_scan = l.starts_with("SCAN")
                && (l.contains("INDEX a2a_tasks_unfinished") || l.contains("INDEX a2a_tasks_open"));
            assert!(
                (l.starts_with("SEARCH") && l.contains("INDEX")) || partial_scan,
                "{name}: {l:?} does not search an index: {lines:?}"
            );
        }
        if let Some(index) = index {
            let want = if index == "pkey" {
                "sqlite_autoindex_a2a_tasks_1"
            } else {
                index
            };
            assert!(
                on_tasks
                    .iter()
                    .any(|l| l.split_whitespace().any(|w| w == want)),
                "{name}: does not use {index}: {lines:?}"
            );
        }
        assert!(
            !lines.iter().any(|l| l.contains("TEMP B-TREE")),
            "{name}: sorts its rows: {lines:?}"
        );
        // A task's artifact chunks are read from their index.
        for l in lines.iter().filter(|l| l.contains("a2a_artifact_chunks")) {
            assert!(
                l.starts_with("SEARCH") && l.contains("a2a_artifact_chunks_task"),
                "{name}: {l:?} does not search the chunks' index: {lines:?}"
            );
        }
    }

    #[test]
    fn listings_read_an_index_in_order() {
        let conn = db();
        let owner = owner();
        for shape in listing_shapes().into_iter().chain(extra_shapes()) {
            let page = page_query::<Lite>(&owner, &shape.query);
            assert_indexed(shape.name, &plan(&conn, &page), Some(shape.index));
            let count = count_query::<Lite>(&owner, &shape.query);
            let lines = plan(&conn, &count);
            if shape.query.status_after.is_some() {
                // Counted through any of the owner's indexes (covering).
                assert_indexed(shape.name, &lines, None);
            } else {
                // Read from the counters' primary key.
                let counters: Vec<&String> =
                    lines.iter().filter(|l| l.contains("_counts")).collect();
                assert!(
                    !counters.is_empty()
                        && counters
                            .iter()
                            .all(|l| l.starts_with("SEARCH") && l.contains("PRIMARY KEY"))
                        && !lines.iter().any(|l| l.contains("a2a_tasks")),
                    "{}: the total is not read from the counters: {lines:?}",
                    shape.name
                );
            }
        }
    }

    #[test]
    fn point_reads_recovery_and_purge_read_an_index() {
        let conn = db();
        let purge = purge_query::<Lite>();
        for (name, s, index) in point_statements::<Lite>(&purge, "a2a_tasks_open") {
            assert_indexed(name, &plan(&conn, &s), Some(index));
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use crate::store::sql::driver::{Conn as _, SqlRow as _};
    use crate::store::sql::postgres::Pg;
    use crate::store::sql::postgres::testing::TestSchema;
    use sqlx::postgres::PgPoolOptions;

    /// PostgreSQL's plan of a statement, with sequential scans disabled:
    /// on a small table the planner prefers one even where an index
    /// serves, so the question asked is whether an index can serve at all.
    async fn plan(pool: &sqlx::PgPool, s: &Stmt<'_>) -> String {
        let mut explain = Stmt::new(format!("EXPLAIN {}", s.sql()));
        for a in s.args() {
            explain = explain.arg(*a);
        }
        let rows = (&*pool).fetch_all(explain).await.expect("EXPLAIN");
        rows.iter()
            .map(|r| r.text("QUERY PLAN").expect("a line of the plan"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn assert_indexed(name: &str, plan: &str, index: &str) {
        let want = if index == "pkey" {
            "a2a_tasks_pkey"
        } else {
            index
        };
        assert!(
            !plan.contains("Seq Scan on a2a_tasks"),
            "{name}: scans the table:\n{plan}"
        );
        assert!(plan.contains(want), "{name}: does not use {want}:\n{plan}");
        // The purge sorts the ids of its batch (at most a few hundred) to
        // join them: bounded, whatever the table holds.
        assert!(
            name == "purge" || !plan.contains("Sort"),
            "{name}: sorts its rows:\n{plan}"
        );
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn postgres_queries_read_an_index() {
        let Some(schema) = TestSchema::create("a2a_plans", "the query-plan test").await else {
            return;
        };
        // Runs the migrations.
        drop(schema.store(1).await);
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(schema.options.clone())
            .await
            .expect("connect to the test schema");
        (&pool)
            .execute(Stmt::new("SET enable_seqscan = off"))
            .await
            .expect("SET enable_seqscan");
        let owner = owner();
        for shape in listing_shapes().into_iter().chain(extra_shapes()) {
            let page = page_query::<Pg>(&owner, &shape.query);
            assert_indexed(shape.name, &plan(&pool, &page).await, shape.index);
        }
        let purge = purge_query::<Pg>();
        for (name, s, index) in point_statements::<Pg>(&purge, "a2a_tasks_unfinished") {
            assert_indexed(name, &plan(&pool, &s).await, index);
        }
        pool.close().await;
        schema.drop_schema().await;
    }
}
