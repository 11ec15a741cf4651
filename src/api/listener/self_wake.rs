//! [`RepollOnSelfWake`]: a future that is polled again at once, inside the same poll, when it
//! wakes itself while being polled, instead of being handed back to the runtime.
//!
//! What it fixes: hyper's HTTP/1 connection task hands a request's body to the handler through
//! a channel inside the same task, and the handler taking the body tells the sender (the
//! connection task itself) to go on. The task is thus woken while it runs, once per POST, and
//! Tokio reschedules a task woken during its own poll as a yield, which always notifies an idle
//! sibling worker (a futex wake-up; across CPUs an IPI, about 30 µs on a VM that halts idle
//! vCPUs). Polling again here does what the yield would have done, minus the hand-off.
//!
//! Measured with tokio 1.54.1, hyper 1.12.0 and hyper-util 0.1.21 (`Cargo.lock`), on a 2-vCPU
//! VM (issue 4): `read_file`'s single-call p50 unpinned went from 121.8–123.5 µs (2.75–2.92×
//! the floor) to 35.0–37.5 µs (0.91–0.99×), 100-call batches from about 68 000 to 72 000
//! calls/s. How the wake was found and the traces before and after: `docs/performance.md`,
//! "Tokio's sibling wake-up" and "`RepollOnSelfWake`, measured".
//!
//! Re-checking it after an upgrade of tokio, hyper or hyper-util (either may stop waking the
//! task, or start deferring such wakes itself): run the bench with the wrapper on and off,
//! one after the other on the same machine,
//!
//! ```text
//! TOOLD_BENCH_ONLY=latency cargo bench --bench load
//! TOOLD_BENCH_ONLY=latency TOOLD_REPOLL_SELF_WAKE=false cargo bench --bench load
//! ```
//!
//! and compare the single-call latency ratio (`toold / floor p50`, unpinned and on one CPU).
//! If it no longer moves, the wrapper can go (and `[server] repoll_self_wake` with it); the
//! switch exists for this check and as a way out should a later version misbehave under it.
//!
//! Deliberately bounded: after [`MAX_POLLS`] polls that each woke the future, it is handed
//! back to the runtime as before, so a future that keeps waking itself (`FuturesUnordered`
//! does every 32 ready futures) still lets others run. A task out of Tokio's cooperative
//! budget is not polled again here: Tokio defers that wake-up until the task's poll is over,
//! when it reaches the task as any other wake-up does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// Polls of the inner future per poll of this one, at most.
const MAX_POLLS: usize = 4;

/// The inner future is being polled.
const POLLING: u8 = 1;
/// The inner future was woken since its poll began.
const WOKEN: u8 = 2;

/// Wraps `inner`; see the module documentation.
pub struct RepollOnSelfWake<F> {
    inner: Pin<Box<F>>,
    shared: Arc<Shared>,
    /// The waker the inner future is polled with, made once: resources comparing wakers
    /// (`Waker::will_wake`) then see the same one every poll.
    waker: Waker,
}

struct Shared {
    state: AtomicU8,
    /// The task's own waker, as of its last poll.
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let before = self.state.fetch_or(WOKEN, Ordering::AcqRel);
        // During a poll the poller sees `WOKEN` when the poll returns and polls again.
        if before & POLLING == 0 {
            self.task.wake();
        }
    }
}

impl<F: Future> RepollOnSelfWake<F> {
    pub fn new(inner: F) -> Self {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(0),
            task: AtomicWaker::new(),
        });
        RepollOnSelfWake {
            inner: Box::pin(inner),
            waker: Waker::from(shared.clone()),
            shared,
        }
    }
}

impl<F: Future> Future for RepollOnSelfWake<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.shared.task.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..MAX_POLLS {
            this.shared.state.store(POLLING, Ordering::Release);
            let polled = this.inner.as_mut().poll(&mut inner_cx);
            let state = this.shared.state.swap(0, Ordering::AcqRel);
            if polled.is_ready() || state & WOKEN == 0 {
                return polled;
            }
        }
        // Woken during every poll: back to the runtime, which polls it again in its turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts how often the task itself is woken.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future>(
        future: &mut RepollOnSelfWake<F>,
        woken: &Arc<CountingWaker>,
    ) -> Poll<F::Output> {
        let waker = Waker::from(woken.clone());
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    /// Wakes itself on each of its first `self_wakes` polls, then is ready.
    fn waking_itself(self_wakes: usize) -> impl Future<Output = usize> {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > self_wakes {
                return Poll::Ready(polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_wake_during_the_poll_is_a_poll_again_not_a_wake_of_the_task() {
        let woken = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut future = RepollOnSelfWake::new(waking_itself(1));
        assert_eq!(poll_once(&mut future, &woken), Poll::Ready(2));
        assert_eq!(woken.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_goes_back_to_the_runtime() {
        let woken = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut future = RepollOnSelfWake::new(waking_itself(MAX_POLLS + 1));
        assert_eq!(poll_once(&mut future, &woken), Poll::Pending);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "handed back once");
        assert_eq!(poll_once(&mut future, &woken), Poll::Ready(MAX_POLLS + 2));
    }

    #[test]
    fn a_wake_after_the_poll_wakes_the_task() {
        let woken = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let stored: Arc<std::sync::Mutex<Option<Waker>>> = Arc::default();
        let keep = stored.clone();
        let mut ready = false;
        let mut future = RepollOnSelfWake::new(std::future::poll_fn(move |cx| {
            if ready {
                return Poll::Ready(());
            }
            ready = true;
            *keep.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }));
        assert_eq!(poll_once(&mut future, &woken), Poll::Pending);
        assert_eq!(woken.0.load(Ordering::SeqCst), 0);
        // From another thread, after the poll: the task must be told.
        let waker = stored.lock().unwrap().take().unwrap();
        std::thread::spawn(move || waker.wake()).join().unwrap();
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_once(&mut future, &woken), Poll::Ready(()));
    }
}
