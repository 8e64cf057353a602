//! A waker that keeps a task's own wake-ups inside the poll that made
//! them: [`Gated`], for the `http` backend's plain connections and for the
//! service's connections (`lf-handoff serve`), which is why it lives here,
//! below both, and is built whatever backends are.
//!
//! hyper's HTTP/1.1 connection and the request or answer it hands over
//! talk through channels, and each side wakes the other when it moves:
//! when both are polled by one task (the client's call in
//! `http/plain.rs`, the server's connection task, where the handler
//! reads the request's body), every such wake is the task waking itself.
//! tokio queues a task woken while it runs again and wakes an idle worker
//! thread to take it: on a small machine, several thread wake-ups a call
//! for nothing. Polled through a [`Gate`], a wake that comes while the
//! task is inside the poll only asks for another round of the same poll;
//! one that comes from elsewhere (the socket became readable, a store's
//! thread finished) wakes the task as usual.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The most rounds of one poll before it lets the runtime run other
/// tasks (a future that keeps waking itself, as tokio's cooperative
/// budget does when it runs out). A call's hand-overs take a few.
const MAX_ROUNDS: usize = 8;

/// What a gate's waker records, and the task it wakes.
#[derive(Default)]
struct Flags {
    caller: AtomicWaker,
    inside: AtomicBool,
    again: AtomicBool,
}

impl Wake for Flags {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.again.store(true, Ordering::SeqCst);
        // Outside a poll, or one that has just ended: the task must run.
        if !self.inside.load(Ordering::SeqCst) {
            self.caller.wake();
        }
    }
}

/// The waker a gated future is polled with, and what it records.
pub(crate) struct Gate {
    flags: Arc<Flags>,
    waker: Waker,
}

impl Default for Gate {
    fn default() -> Self {
        let flags = Arc::new(Flags::default());
        Self {
            waker: Waker::from(flags.clone()),
            flags,
        }
    }
}

impl Gate {
    /// From now until the next poll, a wake of this gate stays inside it:
    /// for a hand-over the task itself makes just before it polls.
    // Only the `http` backend's plain connections hold the gate or drive it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn hold(&self) {
        self.flags.inside.store(true, Ordering::SeqCst);
    }

    /// Polls `step` with this gate's waker until it is ready, or until
    /// nothing but a wake from elsewhere can make it go on; `cx` is the
    /// task's own context.
    pub(crate) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        mut step: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let flags = &self.flags;
        flags.caller.register(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..MAX_ROUNDS {
            flags.inside.store(true, Ordering::SeqCst);
            flags.again.store(false, Ordering::SeqCst);
            let polled = step(&mut inner);
            flags.inside.store(false, Ordering::SeqCst);
            if polled.is_ready() || !flags.again.load(Ordering::SeqCst) {
                return polled;
            }
        }
        // Still woken after many rounds: let the runtime run the others.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// [`poll`](Self::poll)s `step` until it is ready.
    // Only the `http` backend's plain connections hold the gate or drive it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) async fn drive<T>(&self, mut step: impl FnMut(&mut Context<'_>) -> Poll<T>) -> T {
        std::future::poll_fn(|cx| self.poll(cx, &mut step)).await
    }
}

/// `F`, polled through a [`Gate`] of its own.
pub struct Gated<F> {
    inner: Pin<Box<F>>,
    gate: Gate,
}

impl<F> Gated<F> {
    /// `inner`, gated.
    pub fn new(inner: F) -> Self {
        Self {
            inner: Box::pin(inner),
            gate: Gate::default(),
        }
    }
}

impl<F> std::fmt::Debug for Gated<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated").finish_non_exhaustive()
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        this.gate.poll(cx, |gated| inner.as_mut().poll(gated))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn outer() -> (Arc<Counted>, Waker) {
        let counted = Arc::new(Counted::default());
        (counted.clone(), Waker::from(counted))
    }

    /// Pending `wakes` times, waking itself each time, then ready with how
    /// many times it was polled.
    fn waking_itself(wakes: usize) -> impl Future<Output = usize> {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > wakes {
                return Poll::Ready(polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_future_that_wakes_itself_finishes_in_one_poll() {
        let (counted, waker) = outer();
        let mut gated = std::pin::pin!(Gated::new(waking_itself(3)));
        let polled = gated.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(4));
        assert_eq!(counted.0.load(Ordering::SeqCst), 0, "no wake of the task");
    }

    #[test]
    fn a_future_that_keeps_waking_itself_lets_others_run() {
        let (counted, waker) = outer();
        let mut gated = std::pin::pin!(Gated::new(waking_itself(usize::MAX)));
        let polled = gated.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Pending);
        assert_eq!(
            counted.0.load(Ordering::SeqCst),
            1,
            "woken once, to run again"
        );
    }

    #[test]
    fn a_wake_from_elsewhere_reaches_the_task() {
        let (counted, waker) = outer();
        let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
        let keep = kept.clone();
        let mut gated = std::pin::pin!(Gated::new(std::future::poll_fn(move |cx| {
            *keep
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cx.waker().clone());
            Poll::<()>::Pending
        })));
        let polled = gated.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Pending);
        assert_eq!(counted.0.load(Ordering::SeqCst), 0);
        let stored = kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(stored) = stored {
            std::thread::spawn(move || stored.wake())
                .join()
                .unwrap_or_default();
        }
        assert_eq!(counted.0.load(Ordering::SeqCst), 1);
    }
}
