//! A [`Looper`] driven by a glib [`MainContext`] (GTK's main loop), feature
//! `glib`.
//!
//! [`attach`] adds a unix-fd source on the looper's fd to the context:
//! glib polls the fd with the rest of its sources and calls
//! [`dispatch_ready`](Looper::dispatch_ready) when it is readable, which is
//! exactly when the looper has work (cross-thread posts and wakes, timers
//! that came due, I/O). So deliloop tasks run on the GTK thread, timers
//! included, with no glib timeout source and no polling.

use std::os::fd::AsRawFd;
use std::rc::Rc;

use ::glib::thread_guard::ThreadGuard;
use ::glib::{ControlFlow, IOCondition, MainContext, Priority, SourceId};

use crate::Looper;

/// Drives `looper` from `context`: returns the glib source's id (remove it
/// with [`SourceId::remove`] to detach). The source goes away by itself once
/// the looper has quit or been dropped.
///
/// Call it on the thread that owns the looper and iterates `context` (the
/// GTK thread): the source runs the looper there, and panics if glib ever
/// dispatches it on another thread.
///
/// ```
/// use std::time::Duration;
/// use deliloop::Looper;
///
/// let context = glib::MainContext::new();
/// let _guard = context.acquire().unwrap();
/// let looper = Looper::new().unwrap();
/// deliloop::embed::glib::attach(&looper, &context);
/// let h = looper.handle();
/// std::thread::spawn(move || {
///     let h2 = h.clone();
///     h.post_delayed(Duration::from_millis(5), move || h2.quit()).unwrap();
/// });
/// while !looper.handle().is_quit() {
///     context.iteration(true);
/// }
/// ```
pub fn attach(looper: &Looper, context: &MainContext) -> SourceId {
    // Arm the fd first: anything already pending makes it readable at once.
    looper.dispatch_ready();
    let core = ThreadGuard::new(Rc::downgrade(&looper.core));
    let source = ::glib::source::unix_fd_source_new(
        looper.as_raw_fd(),
        IOCondition::IN | IOCondition::ERR | IOCondition::HUP,
        Some("deliloop"),
        Priority::DEFAULT,
        move |_, _| {
            let Some(core) = core.get_ref().upgrade() else {
                return ControlFlow::Break;
            };
            if super::dispatch_core(&core).quit {
                ControlFlow::Break
            } else {
                ControlFlow::Continue
            }
        },
    );
    source.attach(Some(context))
}
