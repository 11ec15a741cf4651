//! The audit log across sessions: `query_calls` with each filter and several at once, both
//! orders, paging while rows are inserted, an agent's view (sessions of its own), and
//! `prune_calls` deleting old rows with their offloaded results.

use std::collections::HashSet;
use std::time::Duration;

use toold::dispatch::AuditRecord;
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel};
use toold::store::{CallDecision, CallFilter, CallOrder, CallQuery, CallRow, SessionRecord};
use toold::tool::ErrorKind;

use crate::store::harness::{Backend, Fixture, audit_record, now, session};

/// Every row `filter` selects, in `order`, paged by `page`.
pub async fn every_row(
    fixture: &Fixture,
    filter: &CallFilter,
    order: CallOrder,
    page: u32,
) -> Vec<CallRow> {
    let mut rows = Vec::new();
    let mut after = None;
    loop {
        let query = CallQuery {
            filter: filter.clone(),
            order,
            after,
            limit: page,
        };
        let got = fixture.store.query_calls(&query).await.unwrap();
        assert!(got.rows.len() <= page as usize);
        rows.extend(got.rows);
        match got.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return rows,
        }
    }
}

fn ids(rows: &[CallRow]) -> Vec<String> {
    rows.iter().map(|row| row.record.call_id.clone()).collect()
}

fn allow(by: DecidedBy) -> Option<PermissionDecision> {
    Some(PermissionDecision::Allow { decided_by: by })
}

fn deny(by: DecidedBy) -> Option<PermissionDecision> {
    Some(PermissionDecision::Deny {
        decided_by: by,
        reason: "no".to_owned(),
    })
}

/// Six rows over three sessions (s1, s2 of agent-a; s3 of agent-b), an hour apart.
fn varied_rows() -> Vec<AuditRecord> {
    let hour = Duration::from_secs(3600);
    let mode = DecidedBy::Mode {
        mode: PermissionLevel::ReadOnly,
    };
    let rule = DecidedBy::Rule {
        rule: "bash(rm:*)".to_owned(),
        source: toold::permission::RuleSource::Server,
    };
    let hook = DecidedBy::Hook {
        hook: "guard".to_owned(),
    };
    let approver = DecidedBy::Approver {
        approver: "http".to_owned(),
        token: None,
        approval_id: "appr_1".to_owned(),
        asked_by: Box::new(mode.clone()),
    };
    let base = now() - 10 * hour;
    let row = |n: u32, session: &str, batch: &str, principal: &str| AuditRecord {
        started_at: base + n * hour,
        principal: Some(principal.to_owned()),
        ..audit_record(session, batch, &format!("c{n}"), n as usize)
    };
    vec![
        // c0: allowed by the mode (read_file, requested as Read).
        AuditRecord {
            decision: allow(mode.clone()),
            ..row(0, "s1", "b1", "agent-a")
        },
        // c1: bash denied by a rule.
        AuditRecord {
            tool: Some("bash".to_owned()),
            requested_name: "bash".to_owned(),
            decision: deny(rule),
            is_error: true,
            error_kind: Some(ErrorKind::PermissionDenied),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
            ..row(1, "s1", "b1", "agent-a")
        },
        // c2: bash denied by a hook.
        AuditRecord {
            tool: Some("bash".to_owned()),
            requested_name: "Bash".to_owned(),
            decision: deny(hook),
            is_error: true,
            error_kind: Some(ErrorKind::HookBlocked),
            ..row(2, "s2", "b2", "agent-a")
        },
        // c3: asked and approved.
        AuditRecord {
            tool: Some("bash".to_owned()),
            requested_name: "bash".to_owned(),
            decision: allow(approver),
            ..row(3, "s3", "b3", "agent-b")
        },
        // c4: allowed, then failed.
        AuditRecord {
            decision: allow(mode.clone()),
            is_error: true,
            error_kind: Some(ErrorKind::Execution),
            ..row(4, "s3", "b3", "agent-b")
        },
        // c5: an unknown tool (no decision), timed out is kind `timeout`.
        AuditRecord {
            tool: None,
            requested_name: "reed_file".to_owned(),
            decision: None,
            is_error: true,
            error_kind: Some(ErrorKind::Timeout),
            ..row(5, "s3", "b4", "agent-b")
        },
    ]
}

async fn varied_store(backend: Backend) -> (Fixture, Vec<AuditRecord>) {
    let fixture = Fixture::new(backend).await;
    for (id, principal) in [("s1", "agent-a"), ("s2", "agent-a"), ("s3", "agent-b")] {
        let record = SessionRecord {
            principal: Some(principal.to_owned()),
            ..session(id)
        };
        fixture.store.insert_session(&record).await.unwrap();
    }
    let rows = varied_rows();
    fixture.store.record_many(rows.clone()).await.unwrap();
    (fixture, rows)
}

pub async fn each_filter_and_their_combinations_select_exactly_their_rows(backend: Backend) {
    let (fixture, rows) = varied_store(backend).await;
    let at = |n: usize| rows[n].started_at;
    let text = |s: &str| Some(s.to_owned());
    let cases: Vec<(&str, CallFilter, &[&str])> = vec![
        (
            "nothing",
            CallFilter::default(),
            &["c5", "c4", "c3", "c2", "c1", "c0"],
        ),
        (
            "session",
            CallFilter {
                session_id: text("s3"),
                ..Default::default()
            },
            &["c5", "c4", "c3"],
        ),
        (
            "batch",
            CallFilter {
                batch_id: text("b1"),
                ..Default::default()
            },
            &["c1", "c0"],
        ),
        (
            "principal",
            CallFilter {
                principal: text("agent-a"),
                ..Default::default()
            },
            &["c2", "c1", "c0"],
        ),
        (
            "resolved tool",
            CallFilter {
                tool: text("bash"),
                ..Default::default()
            },
            &["c3", "c2", "c1"],
        ),
        (
            "requested name",
            CallFilter {
                tool: text("Bash"),
                ..Default::default()
            },
            &["c2"],
        ),
        (
            "unresolved name",
            CallFilter {
                tool: text("reed_file"),
                ..Default::default()
            },
            &["c5"],
        ),
        (
            "denied",
            CallFilter {
                decision: Some(CallDecision::Deny),
                ..Default::default()
            },
            &["c2", "c1"],
        ),
        (
            "allowed",
            CallFilter {
                decision: Some(CallDecision::Allow),
                ..Default::default()
            },
            &["c4", "c3", "c0"],
        ),
        (
            "by a rule",
            CallFilter {
                decided_by: text("rule"),
                ..Default::default()
            },
            &["c1"],
        ),
        (
            "by a hook",
            CallFilter {
                decided_by: text("hook"),
                ..Default::default()
            },
            &["c2"],
        ),
        (
            "by a person",
            CallFilter {
                decided_by: text("approver"),
                ..Default::default()
            },
            &["c3"],
        ),
        (
            "by the mode",
            CallFilter {
                decided_by: text("mode"),
                ..Default::default()
            },
            &["c4", "c0"],
        ),
        (
            "error kind",
            CallFilter {
                error_kind: Some(ErrorKind::Timeout),
                ..Default::default()
            },
            &["c5"],
        ),
        (
            "errors",
            CallFilter {
                is_error: Some(true),
                ..Default::default()
            },
            &["c5", "c4", "c2", "c1"],
        ),
        (
            "successes",
            CallFilter {
                is_error: Some(false),
                ..Default::default()
            },
            &["c3", "c0"],
        ),
        (
            "since",
            CallFilter {
                since: Some(at(4)),
                ..Default::default()
            },
            &["c5", "c4"],
        ),
        (
            "until",
            CallFilter {
                until: Some(at(1)),
                ..Default::default()
            },
            &["c0"],
        ),
        (
            "window",
            CallFilter {
                since: Some(at(1)),
                until: Some(at(3)),
                ..Default::default()
            },
            &["c2", "c1"],
        ),
        (
            "trace",
            CallFilter {
                trace_id: text("4bf92f3577b34da6a3ce929d0e0e4736"),
                ..Default::default()
            },
            &["c1"],
        ),
        (
            "agent-a's sessions",
            CallFilter {
                session_principal: text("agent-a"),
                ..Default::default()
            },
            &["c2", "c1", "c0"],
        ),
        (
            "tool + decision + window",
            CallFilter {
                tool: text("bash"),
                decision: Some(CallDecision::Deny),
                since: Some(at(2)),
                ..Default::default()
            },
            &["c2"],
        ),
        (
            "principal + errors",
            CallFilter {
                principal: text("agent-b"),
                is_error: Some(true),
                ..Default::default()
            },
            &["c5", "c4"],
        ),
        (
            "an agent asking for another's principal",
            CallFilter {
                session_principal: text("agent-a"),
                principal: text("agent-b"),
                ..Default::default()
            },
            &[],
        ),
        (
            "no such tool",
            CallFilter {
                tool: text("nope"),
                ..Default::default()
            },
            &[],
        ),
    ];
    for (name, filter, expected) in cases {
        for page in [1, 2, 100] {
            let newest = every_row(&fixture, &filter, CallOrder::NewestFirst, page).await;
            assert_eq!(
                ids(&newest),
                expected,
                "{name}, newest first, pages of {page}"
            );
            let oldest = every_row(&fixture, &filter, CallOrder::OldestFirst, page).await;
            let mut reversed = ids(&oldest);
            reversed.reverse();
            assert_eq!(reversed, expected, "{name}, oldest first, pages of {page}");
        }
    }
    // Rows read back whole through a filtered query too.
    let all = every_row(&fixture, &CallFilter::default(), CallOrder::OldestFirst, 10).await;
    let records: Vec<AuditRecord> = all.into_iter().map(|row| row.record).collect();
    assert_eq!(records, rows);
}

pub async fn a_zero_limit_page_says_whether_rows_remain_and_continues_from_the_start(
    backend: Backend,
) {
    let (fixture, _) = varied_store(backend).await;
    let query = CallQuery {
        limit: 0,
        ..Default::default()
    };
    let empty = fixture.store.query_calls(&query).await.unwrap();
    assert!(empty.rows.is_empty());
    let next = CallQuery {
        after: empty.next_cursor,
        limit: 10,
        ..Default::default()
    };
    assert_eq!(
        fixture.store.query_calls(&next).await.unwrap().rows.len(),
        6
    );
    let none = CallQuery {
        filter: CallFilter {
            principal: Some("nobody".to_owned()),
            ..Default::default()
        },
        ..query
    };
    assert_eq!(
        fixture.store.query_calls(&none).await.unwrap().next_cursor,
        None
    );
}

pub async fn paging_newest_first_while_rows_are_inserted_skips_and_repeats_nothing(
    backend: Backend,
) {
    let fixture = Fixture::new(backend).await;
    let first: Vec<AuditRecord> = (0..300)
        .map(|i| audit_record("s1", "b0", &format!("old-{i}"), i))
        .collect();
    fixture.store.record_many(first).await.unwrap();
    let store = fixture.store.clone();
    let writer = tokio::spawn(async move {
        for i in 0..300 {
            let record = audit_record("s2", "b1", &format!("new-{i}"), i);
            store.record(record).await.unwrap();
        }
    });
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let query = CallQuery {
            after,
            limit: 7,
            ..Default::default()
        };
        let page = fixture.store.query_calls(&query).await.unwrap();
        seen.extend(page.rows);
        tokio::task::yield_now().await;
        match page.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => break,
        }
    }
    writer.await.unwrap();
    // Exactly the rows at or below the first page's top, each once, newest first.
    let top = seen[0].cursor;
    let now_listed = every_row(
        &fixture,
        &CallFilter::default(),
        CallOrder::NewestFirst,
        1000,
    )
    .await;
    let expected: Vec<i64> = now_listed
        .iter()
        .map(|row| row.cursor)
        .filter(|cursor| *cursor <= top)
        .collect();
    let got: Vec<i64> = seen.iter().map(|row| row.cursor).collect();
    assert_eq!(got, expected);
    let unique: HashSet<i64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len());
    assert!(got.len() >= 300, "{}", got.len());
}

pub async fn pruning_deletes_only_rows_older_than_the_cutoff_with_their_results(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    fixture.store.insert_session(&session("s1")).await.unwrap();
    let day = Duration::from_secs(86_400);
    let cutoff = now() - 3 * day;
    let mut records = Vec::new();
    let mut results = Vec::new();
    // 2,500 old rows (more than two chunks), every tenth with an offloaded result, and 5 new.
    for i in 0..2_505usize {
        let old = i < 2_500;
        let mut record = audit_record("s1", "b1", &format!("c{i}"), i);
        record.started_at = if old {
            cutoff - day - Duration::from_millis(i as u64)
        } else {
            cutoff + Duration::from_millis(i as u64)
        };
        if i % 10 == 0 || !old {
            let offloaded = fixture
                .store
                .offload("s1", &record.call_id, &format!("output {i}"))
                .await
                .unwrap();
            results.push((old, offloaded.result_id.clone()));
            record.offloaded = Some(offloaded);
        }
        records.push(record);
    }
    fixture.store.record_many(records).await.unwrap();
    assert_eq!(fixture.store.prune_calls(cutoff).await.unwrap(), 2_500);
    let left = every_row(
        &fixture,
        &CallFilter::default(),
        CallOrder::OldestFirst,
        1000,
    )
    .await;
    assert_eq!(
        ids(&left),
        (2_500..2_505).map(|i| format!("c{i}")).collect::<Vec<_>>()
    );
    for (old, result_id) in results {
        let read = fixture.store.read(&result_id, 0, 100).await;
        assert_eq!(read.is_err(), old, "{result_id}: {read:?}");
    }
    assert_eq!(fixture.store.prune_calls(cutoff).await.unwrap(), 0);
}
