//! The store factory and record builders the conformance tests share.
//!
//! A `Fixture` owns a fresh store of a [`Backend`] and whatever it lives in (for SQLite, a
//! temporary directory; for Postgres, a schema of its own in the database named by
//! `TOOLD_TEST_POSTGRES_URL`, dropped at the end, so tests run in parallel), and can reopen
//! the same database, as a restarted daemon would, or open it again beside the first, as a
//! second daemon would. Builders make
//! records with times already truncated to the millisecond, the precision the `Store`
//! contract keeps, so a record read back compares equal to the one written.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tempfile::TempDir;
use toold::dispatch::AuditRecord;
use toold::event::{Event, EventType};
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel};
use toold::registry::calls::BatchFormat;
use toold::store::{ApprovalRecord, BatchRecord, BatchStatus, SessionRecord, Store};
use toold::tool::{ErrorKind, OffloadedResult};

use crate::support::postgres::TestSchema;

pub const NODE: &str = "node-test";

/// Which implementation a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The Postgres server for tests: `TOOLD_TEST_POSTGRES_URL`. In CI (`CI=true`) a missing or
/// unreachable server fails the test; elsewhere the Postgres tests are skipped with a note.
pub fn postgres_url() -> Option<String> {
    crate::support::postgres::postgres_url("Postgres store tests")
}

/// A fresh store, and the means to reopen its database.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    _dir: TempDir,
    url: String,
    /// The test's Postgres schema, dropped with the fixture.
    schema: Option<TestSchema>,
}

impl Fixture {
    pub async fn new(backend: Backend) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let (url, schema) = match backend {
            Backend::Sqlite => {
                let path: PathBuf = dir.path().join("toold.db");
                (path.to_str().expect("temp path is UTF-8").to_owned(), None)
            }
            Backend::Postgres => {
                let server = postgres_url().expect("the generated test checked for a server");
                let schema = TestSchema::create(&server).await;
                (schema.url(), Some(schema))
            }
        };
        let store = open(&url).await;
        Fixture {
            store,
            _dir: dir,
            url,
            schema,
        }
    }

    /// The same database opened again, as a second daemon would (its own node id).
    pub async fn another(&self, node_id: &str) -> Arc<dyn Store> {
        toold::store::open(&self.url, node_id)
            .await
            .expect("open the store again")
    }

    /// Runs `sql` on the database behind the store's back, on a connection of its own: to
    /// plant rows the store itself would never write.
    pub async fn execute_raw(&self, sql: &str) {
        use sqlx::{ConnectOptions, Connection};
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        if self.schema.is_some() {
            let mut connection = sqlx::PgConnection::connect(&self.url)
                .await
                .expect("connect to the test schema");
            sqlx::raw_sql(sql)
                .execute(&mut connection)
                .await
                .expect("raw SQL runs");
        } else {
            let mut connection = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&self.url)
                .connect()
                .await
                .expect("open the test database");
            sqlx::raw_sql(sql)
                .execute(&mut connection)
                .await
                .expect("raw SQL runs");
        }
    }

    /// Drops the store without closing it (as a crash would) and opens the same database.
    pub async fn reopen(&mut self) {
        let fresh = open(&self.url).await;
        let old = std::mem::replace(&mut self.store, fresh);
        assert_eq!(
            Arc::strong_count(&old),
            1,
            "a test still holds the old store"
        );
        drop(old);
    }
}

async fn open(url: &str) -> Arc<dyn Store> {
    toold::store::open(url, NODE).await.expect("open store")
}

/// `time` truncated to whole milliseconds, as the store keeps it.
pub fn ms(time: SystemTime) -> SystemTime {
    let since = time.duration_since(UNIX_EPOCH).expect("after the epoch");
    UNIX_EPOCH + Duration::from_millis(since.as_millis() as u64)
}

pub fn now() -> SystemTime {
    ms(SystemTime::now())
}

pub fn session(id: &str) -> SessionRecord {
    SessionRecord {
        id: id.to_owned(),
        working_directory: PathBuf::from(format!("/work/{id}")),
        permission_mode: PermissionLevel::WorkspaceWrite,
        interactive: true,
        owner: NODE.to_owned(),
        principal: Some("agent-a".to_owned()),
        created_at: now(),
        closed_at: None,
        options: json!({"rules": {"deny": ["bash(rm:*)"]}, "metadata": {"user": "ünïcode"}}),
        state: json!({}),
    }
}

pub fn audit_record(session_id: &str, batch_id: &str, call_id: &str, index: usize) -> AuditRecord {
    AuditRecord {
        session_id: session_id.to_owned(),
        batch_id: batch_id.to_owned(),
        call_id: call_id.to_owned(),
        index,
        requested_name: "Read".to_owned(),
        tool: Some("read_file".to_owned()),
        input: json!({"path": "src/lib.rs", "limit": 10}),
        decision: Some(PermissionDecision::Allow {
            decided_by: DecidedBy::Mode {
                mode: PermissionLevel::ReadOnly,
            },
        }),
        is_error: false,
        error_kind: None,
        output_chars: 1234,
        offloaded: None,
        started_at: now(),
        duration_ms: 0.375,
        cancelled_by: None,
        trace_id: None,
        principal: Some("agent-a".to_owned()),
        isolation: None,
    }
}

/// An audit record with every optional field set.
pub fn full_audit_record(session_id: &str, call_id: &str) -> AuditRecord {
    AuditRecord {
        tool: Some("bash".to_owned()),
        requested_name: "bash".to_owned(),
        input: json!({"command": "cat big.log", "n": 1.5e300, "deep": [[{"x": null}]]}),
        decision: Some(PermissionDecision::Deny {
            decided_by: DecidedBy::Approver {
                approver: "http".to_owned(),
                token: Some("sha256:0123456789ab".to_owned()),
                approval_id: "appr_1".to_owned(),
                asked_by: Box::new(DecidedBy::Rule {
                    rule: "bash(rm:*)".to_owned(),
                    source: toold::permission::RuleSource::Server,
                }),
            },
            reason: "not on a Friday".to_owned(),
        }),
        is_error: true,
        error_kind: Some(ErrorKind::PermissionDenied),
        output_chars: u64::from(u32::MAX) + 7,
        offloaded: Some(OffloadedResult {
            result_id: "res_abc".to_owned(),
            total_chars: 5_000_000,
        }),
        duration_ms: 12.625,
        cancelled_by: Some("mcp_client".to_owned()),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
        isolation: Some("bwrap".to_owned()),
        ..audit_record(session_id, "batch-full", call_id, 3)
    }
}

pub fn batch(batch_id: &str, session_id: &str, key: Option<&str>, hash: &str) -> BatchRecord {
    BatchRecord {
        batch_id: batch_id.to_owned(),
        session_id: session_id.to_owned(),
        format: BatchFormat::Anthropic,
        idempotency_key: key.map(str::to_owned),
        request_hash: hash.to_owned(),
        status: BatchStatus::Running,
        call_count: 2,
        results: None,
        created_at: now(),
        completed_at: None,
    }
}

/// An event stamped at a fixed time (2025-06-15), so two builds of one event compare equal.
pub fn event(seq: u64, event_type: EventType, session_id: &str, tool: Option<&str>) -> Arc<Event> {
    Arc::new(Event {
        seq,
        ts: UNIX_EPOCH + Duration::from_millis(1_750_000_000_123),
        event_type,
        session_id: Arc::from(session_id),
        batch_id: Some(Arc::from("b1")),
        call_id: tool.map(|_| Arc::from(format!("call-{seq}"))),
        tool: tool.map(Arc::from),
        actor: Some(Arc::from("agent-a")),
        data: json!({"seq": seq}).into(),
    })
}

pub fn approval(id: &str, session_id: &str, created_at: SystemTime) -> ApprovalRecord {
    ApprovalRecord {
        id: id.to_owned(),
        session_id: session_id.to_owned(),
        call_id: format!("call-{id}"),
        tool: "bash".to_owned(),
        input: json!({"command": "rm -rf build"}),
        reason: "bash needs workspace_write".to_owned(),
        created_at,
        decision: None,
        decided_by: None,
        decided_at: None,
    }
}

/// A store with sessions `ids` already inserted.
pub async fn with_sessions(backend: Backend, ids: &[&str]) -> Fixture {
    let fixture = Fixture::new(backend).await;
    for id in ids {
        fixture.store.insert_session(&session(id)).await.unwrap();
    }
    fixture
}

/// Text with one-, two-, three- and four-byte characters, `chars` characters long.
pub fn mixed_text(chars: usize) -> String {
    const ALPHABET: [char; 7] = ['a', 'é', '€', '𝄞', '\n', 'z', '中'];
    (0..chars)
        .map(|i| ALPHABET[(i * 7 + i / 13) % ALPHABET.len()])
        .collect()
}
