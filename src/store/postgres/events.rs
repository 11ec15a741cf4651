//! Events on Postgres: numbered by the store for several daemons, announced with NOTIFY, read
//! back by seq with the session/tool/type filter, pruned by age.
//!
//! Numbering: an append locks the one row of `event_seq` (`SELECT … FOR UPDATE`), numbers its
//! events after `last_seq`, inserts them, raises `last_seq` and commits, which releases the
//! lock. Appends from every daemon therefore commit one after another in seq order: once a
//! reader sees seq `n`, no smaller seq can still appear, so "read after the last seq seen"
//! loses nothing. The same transaction runs `pg_notify` on this schema's channel; Postgres
//! delivers it only on commit. [`EventListener`] LISTENs on that channel and wakes readers;
//! after a lost connection (notifications sent meanwhile are gone) it wakes them too, so they
//! re-read the table.
//!
//! Events the bus numbered (`append_events`, the single-daemon contract) are stored with
//! their seqs under the same lock, and `last_seq` follows them.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use sqlx::postgres::{PgListener, PgPool};
use sqlx::{Postgres, QueryBuilder};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::PostgresStore;
use super::convert::{database_error, from_i64, millis, to_i64, write_error};
use crate::event::Event;
use crate::store::reads;
use crate::store::{EventFilter, EventStore, PRUNE_CHUNK_EVENTS, StoreError, delete_in_chunks};

/// Events per INSERT at most (8 parameters each).
const INSERT_ROWS: usize = 4096;

/// Pause before listening again after the listener failed.
const RELISTEN_PAUSE: Duration = Duration::from_millis(500);

/// The NOTIFY channel of the schema the pool's connections use, so fleets (and tests) in
/// other schemas of one database do not wake each other.
async fn channel(pool: &PgPool) -> Result<String, StoreError> {
    let schema: String = sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(pool)
        .await
        .map_err(|err| database_error("reading the current schema", err))?;
    Ok(format!("toold_events.{schema}"))
}

impl PostgresStore {
    /// Stores `events` all or none: with `numbered` under seqs the store gives, else under
    /// their own. Returns the seqs stored.
    pub(super) async fn append_event_rows(
        &self,
        events: &[Arc<Event>],
        numbered: bool,
    ) -> Result<Range<u64>, StoreError> {
        if events.is_empty() {
            let last = self.last_event_seq().await?;
            return Ok(last + 1..last + 1);
        }
        let context = format!("appending {} events", events.len());
        let fail = |err| database_error(&context, err);
        let mut transaction = self.pool.begin().await.map_err(fail)?;
        let last: i64 = sqlx::query_scalar("SELECT last_seq FROM event_seq FOR UPDATE")
            .fetch_one(&mut *transaction)
            .await
            .map_err(fail)?;
        let seqs: Vec<i64> = if numbered {
            (1..=to_i64(events.len(), "event count")?)
                .map(|n| last + n)
                .collect()
        } else {
            events
                .iter()
                .map(|event| to_i64(event.seq, "event seq"))
                .collect::<Result<_, _>>()?
        };
        for (rows, seqs) in events.chunks(INSERT_ROWS).zip(seqs.chunks(INSERT_ROWS)) {
            let inserted = insert(rows, seqs).build().execute(&mut *transaction).await;
            if let Err(err) = inserted {
                drop(transaction);
                return Err(self.append_error(&context, seqs, err).await);
            }
        }
        let highest = seqs.iter().copied().max().unwrap_or(last).max(last);
        sqlx::query("UPDATE event_seq SET last_seq = $1")
            .bind(highest)
            .execute(&mut *transaction)
            .await
            .map_err(fail)?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&self.listener.channel)
            .bind(highest.to_string())
            .execute(&mut *transaction)
            .await
            .map_err(fail)?;
        transaction.commit().await.map_err(fail)?;
        let first = from_i64(seqs[0], "event seq")?;
        Ok(first..first + events.len() as u64)
    }

    /// A failed insert as a store error; a seq already stored is a conflict naming it.
    async fn append_error(&self, context: &str, seqs: &[i64], err: sqlx::Error) -> StoreError {
        let failed = write_error(context, "event seq", "event seq", err);
        if !matches!(failed, StoreError::Conflict(_)) {
            return failed;
        }
        let taken: Option<i64> =
            sqlx::query_scalar("SELECT min(seq) FROM events WHERE seq = ANY($1)")
                .bind(seqs)
                .fetch_one(&self.pool)
                .await
                .unwrap_or(None);
        match taken {
            Some(seq) => StoreError::Conflict(format!("event seq {seq}")),
            None => failed,
        }
    }
}

#[async_trait]
impl EventStore for PostgresStore {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<(), StoreError> {
        self.append_event_rows(events, false).await.map(|_| ())
    }

    async fn append_events_numbered(
        &self,
        events: &[Arc<Event>],
    ) -> Result<Range<u64>, StoreError> {
        self.append_event_rows(events, true).await
    }

    fn numbers_events(&self) -> bool {
        true
    }

    fn event_wakeups(&self) -> Option<watch::Receiver<u64>> {
        Some(self.listener.wakeups())
    }

    async fn read_events(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        reads::events(&self.pool, filter, after_seq, limit).await
    }

    async fn last_event_seq(&self) -> Result<u64, StoreError> {
        reads::last_event_seq(&self.pool).await
    }

    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError> {
        // The events to go are those before the bound (see `reads::prune_bound`), deleted a
        // chunk per statement.
        let Some(bound) = reads::prune_bound(&self.pool, before).await? else {
            return Ok(0);
        };
        let before = millis(before);
        let failed = |err| database_error(&format!("pruning events before {before} ms"), err);
        delete_in_chunks(|| async move {
            sqlx::query(
                "DELETE FROM events WHERE seq IN \
                 (SELECT seq FROM events WHERE seq < $1 ORDER BY seq LIMIT $2)",
            )
            .bind(bound)
            .bind(PRUNE_CHUNK_EVENTS as i64)
            .execute(&self.pool)
            .await
            .map(|done| done.rows_affected())
            .map_err(failed)
        })
        .await
    }
}

fn insert(events: &[Arc<Event>], seqs: &[i64]) -> QueryBuilder<Postgres> {
    let mut query = QueryBuilder::<Postgres>::new(
        "INSERT INTO events (seq, ts, type, session_id, batch_id, call_id, tool, data, actor) ",
    );
    query.push_values(events.iter().zip(seqs), |mut values, (event, seq)| {
        values
            .push_bind(*seq)
            .push_bind(millis(event.ts))
            .push_bind(event.event_type.as_str())
            .push_bind(event.session_id.to_string())
            .push_bind(event.batch_id.as_deref().map(str::to_owned))
            .push_bind(event.call_id.as_deref().map(|id| id.as_bytes().to_vec()))
            .push_bind(event.tool.as_deref().map(|tool| tool.as_bytes().to_vec()))
            .push_bind(event.data.json().to_owned())
            .push_bind(event.actor.as_deref().map(str::to_owned));
    });
    query
}

/// LISTENs on the schema's event channel and wakes readers (see the module header).
pub struct EventListener {
    pub channel: String,
    wakeups: watch::Receiver<u64>,
    stop: CancellationToken,
}

impl EventListener {
    pub async fn start(pool: &PgPool) -> Result<EventListener, StoreError> {
        let channel = channel(pool).await?;
        let mut listener = PgListener::connect_with(pool)
            .await
            .map_err(|err| database_error("connecting the event listener", err))?;
        listener
            .listen(&channel)
            .await
            .map_err(|err| database_error(&format!("listening on \"{channel}\""), err))?;
        let (sender, wakeups) = watch::channel(0);
        let stop = CancellationToken::new();
        tokio::spawn(listen(listener, sender, stop.clone()));
        Ok(EventListener {
            channel,
            wakeups,
            stop,
        })
    }

    pub fn wakeups(&self) -> watch::Receiver<u64> {
        self.wakeups.clone()
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }
}

async fn listen(mut listener: PgListener, wakeups: watch::Sender<u64>, stop: CancellationToken) {
    loop {
        let received = tokio::select! {
            received = listener.try_recv() => received,
            () = stop.cancelled() => return,
        };
        match received {
            Ok(Some(notification)) => {
                let seq = notification.payload().parse::<u64>().unwrap_or(0);
                wakeups.send_modify(|known| *known = (*known).max(seq));
            }
            // The connection was lost (and is re-made on the next receive): what was sent
            // meanwhile is gone, so readers re-read the table.
            Ok(None) => wakeups.send_modify(|_| {}),
            Err(err) => {
                tracing::warn!(error = %err, "event listener failed; listening again");
                wakeups.send_modify(|_| {});
                tokio::select! {
                    () = tokio::time::sleep(RELISTEN_PAUSE) => {}
                    () = stop.cancelled() => return,
                }
            }
        }
    }
}
