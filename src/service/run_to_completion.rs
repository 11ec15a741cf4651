//! Running a batch in the request's own task, to its end even if the request is dropped.
//!
//! A batch must finish (and write its audit rows and bookkeeping) whether or not its client
//! waits for the answer. Spawning it as a task of its own guarantees that, at the price of a
//! task hand-off on every request. [`RunToCompletion`] instead polls the batch inline, in the
//! request's task; if that task drops it unfinished (the client went away, a timeout fired),
//! the batch is spawned there and then and finishes on its own. Either way it is tracked by
//! the service's batch tracker, so a graceful shutdown waits for it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;

type Boxed<T> = Pin<Box<dyn Future<Output = std::thread::Result<T>> + Send>>;

/// A future run inline that outlives its caller: see the module header.
pub struct RunToCompletion<T: Send + 'static> {
    /// `None` once finished.
    running: Option<Boxed<T>>,
}

impl<T: Send + 'static> RunToCompletion<T> {
    /// `work` is already tracked by the caller (`TaskTracker::track_future`). A panic in it
    /// comes back as `Err` (the message), as a spawned task's would.
    pub fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        // Carried, so the batch's spans stay in the request's tree if it is spawned.
        let work = crate::tool::trace::carry(work);
        RunToCompletion {
            running: Some(Box::pin(AssertUnwindSafe(work).catch_unwind())),
        }
    }
}

impl<T: Send + 'static> Future for RunToCompletion<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(running) = self.running.as_mut() else {
            return Poll::Ready(Err("polled after it finished".to_owned()));
        };
        let finished = std::task::ready!(running.as_mut().poll(cx));
        self.running = None;
        Poll::Ready(finished.map_err(|panic| {
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned())
        }))
    }
}

impl<T: Send + 'static> Drop for RunToCompletion<T> {
    fn drop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        // Dropped unfinished: the rest runs as a task of its own. Outside a runtime (it is
        // shutting down and dropping its tasks) there is nothing left to run it on.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = running.await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_finished_future_answers_in_place() {
        assert_eq!(RunToCompletion::new(async { 7 }).await, Ok(7));
    }

    #[tokio::test]
    async fn a_dropped_future_still_finishes() {
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let work = RunToCompletion::new(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // The caller gives up after 5 ms and drops it.
        assert!(
            tokio::time::timeout(Duration::from_millis(5), work)
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_panic_is_an_error_not_an_unwind() {
        let work = RunToCompletion::new(async {
            if true {
                panic!("boom");
            }
        });
        assert_eq!(work.await, Err("boom".to_owned()));
    }
}
