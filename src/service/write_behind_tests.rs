//! The write-behind queue's bound: with the store's writes held, a flood of batch records
//! stops at the bound (the producer waits), and once the writes go through nothing is lost.

use std::sync::Mutex;

use tokio::sync::Semaphore;

use super::*;
use crate::registry::calls::BatchFormat;

/// A sink whose writes wait for a permit each, recording what they were given.
struct HeldSink {
    permits: Arc<Semaphore>,
    /// Batch ids written, in order; and how many writes have started.
    written: Arc<Mutex<Vec<String>>>,
    started: Arc<std::sync::atomic::AtomicUsize>,
    /// Records the first write was handed (set as it starts).
    first: Arc<Mutex<Option<usize>>>,
}

#[async_trait::async_trait]
impl BehindSink for HeldSink {
    async fn write(&self, writes: &BehindWrites) -> Vec<StoreError> {
        if self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            *self.first.lock().unwrap() = Some(writes.batches.len());
        }
        let _permit = self.permits.acquire().await.unwrap();
        self.written
            .lock()
            .unwrap()
            .extend(writes.batches.iter().map(|b| b.batch_id.clone()));
        Vec::new()
    }
}

fn record(n: usize) -> BatchRecord {
    let mut record = super::super::batches::new_record("s1", BatchFormat::Toold, None, 1);
    record.batch_id = format!("b{n}");
    record
}

#[tokio::test]
async fn a_flood_waits_at_the_bound_while_the_store_is_held_and_nothing_is_lost() {
    const QUEUE: usize = 8;
    const RECORDS: usize = 200;
    let sink = HeldSink {
        permits: Arc::new(Semaphore::new(0)),
        written: Arc::default(),
        started: Arc::default(),
        first: Arc::default(),
    };
    let (permits, written, first) = (
        sink.permits.clone(),
        sink.written.clone(),
        sink.first.clone(),
    );
    let behind = Arc::new(WriteBehind::spawn_with(sink, QUEUE));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let producer = {
        let (behind, sent) = (behind.clone(), sent.clone());
        tokio::spawn(async move {
            for n in 0..RECORDS {
                behind.record_batch(record(n)).await;
                sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    // The task takes a first gathering and is held writing it.
    let taken = loop {
        if let Some(taken) = *first.lock().unwrap() {
            break taken;
        }
        tokio::task::yield_now().await;
    };
    assert!(taken < RECORDS);
    // The producer fills the queue behind it, then waits: it gets no further however long
    // it is given.
    let bound = taken + QUEUE;
    while sent.load(std::sync::atomic::Ordering::SeqCst) < bound {
        tokio::task::yield_now().await;
    }
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    assert_eq!(sent.load(std::sync::atomic::Ordering::SeqCst), bound);
    assert!(!producer.is_finished());
    assert!(written.lock().unwrap().is_empty());
    // The store catches up: every record is written, once, in order.
    permits.add_permits(RECORDS);
    producer.await.unwrap();
    behind.flush().await;
    let expected: Vec<String> = (0..RECORDS).map(|n| format!("b{n}")).collect();
    assert_eq!(*written.lock().unwrap(), expected);
}
