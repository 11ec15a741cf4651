//! The gate's discipline, step by step: each waiting call is a future polled by hand, so
//! "queued" and "let in" are observed exactly, not guessed from timing.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::poll;

use super::*;

type Entering<'g> = Pin<Box<dyn Future<Output = GatePass> + Send + 'g>>;

/// Calls arriving in order, each already queued at the gate (polled once).
struct Arrivals<'g> {
    waiting: Vec<Option<Entering<'g>>>,
    inside: Vec<Option<GatePass>>,
}

impl<'g> Arrivals<'g> {
    async fn queue(gate: &'g CallGate, accesses: &[GateAccess]) -> Arrivals<'g> {
        let mut arrivals = Arrivals {
            waiting: Vec::new(),
            inside: Vec::new(),
        };
        for &access in accesses {
            arrivals.waiting.push(Some(Box::pin(gate.enter(access))));
            arrivals.inside.push(None);
            arrivals.let_in().await;
        }
        arrivals
    }

    /// Polls every waiting call once; returns the indexes of all calls now inside.
    async fn let_in(&mut self) -> Vec<usize> {
        for index in 0..self.waiting.len() {
            if let Some(entering) = self.waiting[index].as_mut()
                && let std::task::Poll::Ready(pass) = poll!(entering.as_mut())
            {
                self.waiting[index] = None;
                self.inside[index] = Some(pass);
            }
        }
        (0..self.inside.len())
            .filter(|&i| self.inside[i].is_some())
            .collect()
    }

    fn leave(&mut self, index: usize) {
        assert!(
            self.inside[index].take().is_some(),
            "{index} was not inside"
        );
    }
}

use GateAccess::{Exclusive, Shared};

#[tokio::test]
async fn a_writer_is_not_starved_by_a_stream_of_readers() {
    let gate = CallGate::new(4);
    let reading = gate.enter(Shared).await;
    // A write arrives while a read runs, then reads keep coming: the cap has room for them,
    // yet none gets past the waiting write.
    let mut arrivals = Arrivals::queue(&gate, &[Exclusive]).await;
    let mut readers = Arrivals::queue(&gate, &[Shared; 12]).await;
    assert_eq!(arrivals.let_in().await, Vec::<usize>::new());
    assert_eq!(readers.let_in().await, Vec::<usize>::new());

    drop(reading);
    assert_eq!(arrivals.let_in().await, vec![0], "the write goes next");
    assert_eq!(readers.let_in().await, Vec::<usize>::new());
    arrivals.leave(0);
    // Then the reads that waited, up to the cap, in arrival order.
    assert_eq!(readers.let_in().await, vec![0, 1, 2, 3]);
}

#[tokio::test]
async fn calls_enter_in_arrival_order_reads_together_writes_alone() {
    let gate = CallGate::new(10);
    let writing = gate.enter(Exclusive).await;
    let mut calls = Arrivals::queue(
        &gate,
        &[Shared, Shared, Exclusive, Shared, Exclusive, Shared],
    )
    .await;
    assert_eq!(calls.let_in().await, Vec::<usize>::new());
    drop(writing);
    // Reads on either side of a write are never merged, and nothing overtakes.
    assert_eq!(calls.let_in().await, vec![0, 1]);
    calls.leave(1);
    assert_eq!(
        calls.let_in().await,
        vec![0],
        "the write waits for every read before it"
    );
    calls.leave(0);
    assert_eq!(calls.let_in().await, vec![2]);
    calls.leave(2);
    assert_eq!(calls.let_in().await, vec![3]);
    calls.leave(3);
    assert_eq!(calls.let_in().await, vec![4]);
    calls.leave(4);
    assert_eq!(calls.let_in().await, vec![5]);
}

#[tokio::test]
async fn shared_calls_beyond_the_cap_wait_for_a_place() {
    let gate = CallGate::new(2);
    let mut calls = Arrivals::queue(&gate, &[Shared, Shared, Shared, Shared]).await;
    assert_eq!(calls.let_in().await, vec![0, 1]);
    calls.leave(1);
    assert_eq!(
        calls.let_in().await,
        vec![0, 2],
        "the first in line takes the place"
    );
    // A cap of zero still lets one call in at a time rather than none ever.
    let closed = CallGate::new(0);
    let one = tokio::time::timeout(Duration::from_secs(5), closed.enter(Shared)).await;
    assert!(one.is_ok(), "a gate with cap 0 must still admit a call");
}

#[tokio::test]
async fn a_caller_that_gives_up_leaves_the_queue() {
    let gate = CallGate::new(4);
    let reading = gate.enter(Shared).await;
    let mut calls = Arrivals::queue(&gate, &[Exclusive, Shared]).await;
    // The write's caller goes away (its request dropped): the read behind it is not stuck.
    calls.waiting[0] = None;
    assert_eq!(calls.let_in().await, vec![1]);
    drop(reading);
    let writing = tokio::time::timeout(Duration::from_secs(5), async {
        calls.leave(1);
        gate.enter(Exclusive).await
    })
    .await;
    assert!(writing.is_ok(), "the gate is free once everyone left");
}
