//! [`yield_now`]: one trip through the loop's ready queue.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Lets the other ready tasks run, then resumes: the task wakes itself
/// and goes to the back of the loop's ready queue, so ready tasks that
/// yield in turn alternate strictly.
///
/// Off a loop (under any executor) it returns `Pending` once after waking
/// its waker, which is what that executor makes of it.
///
/// ```
/// use std::cell::RefCell;
/// use std::rc::Rc;
///
/// let order = Rc::new(RefCell::new(Vec::new()));
/// deliloop::block_on(async {
///     let tasks: Vec<_> = ["a", "b"]
///         .into_iter()
///         .map(|name| {
///             let order = order.clone();
///             deliloop::spawn_local(async move {
///                 for _ in 0..2 {
///                     order.borrow_mut().push(name);
///                     deliloop::yield_now().await;
///                 }
///             })
///         })
///         .collect();
///     for t in tasks {
///         t.await;
///     }
/// });
/// assert_eq!(*order.borrow(), ["a", "b", "a", "b"]);
/// ```
pub async fn yield_now() {
    YieldNow { yielded: false }.await;
}

/// Pending at its first poll (with the waker woken), ready at the next.
struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // On the loop thread a wake during the task's own poll reschedules
        // it after the poll returns, behind every task already ready.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
