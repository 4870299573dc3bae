//! Using the async ecosystem: what to reach for around a Looper.
//!
//! deliloop runs any future that relies only on its [`Waker`]: the
//! runtime-agnostic crates below work on a Looper as they do anywhere,
//! and `tests/ecosystem.rs` runs each one on a Looper.
//!
//! | for | use | shown in |
//! |---|---|---|
//! | channels | `async-channel` (bounded or not, many senders and receivers), `futures::channel` (`oneshot`, `mpsc`) | `async_channel_carries_every_message_once`, `futures_channels_work_across_threads` |
//! | locks held across an `.await` | `async-lock` (`Mutex`, `RwLock`, `Semaphore`) | `async_lock_mutex_and_semaphore_hold_across_awaits` |
//! | a `Notify`-like event | `event-listener` | `event_listener_wakes_every_waiting_task` |
//! | files | `async-fs` (its own thread pool), or [`spawn_blocking`](crate::spawn_blocking) around `std::fs` | `async_fs_writes_and_reads_a_file_off_the_loop` |
//! | task groups | a `FuturesUnordered` of [`Task`](crate::Task)s | `a_futures_unordered_of_tasks_is_a_task_group` |
//! | tokio-only crates | `async-compat`'s `Compat` around the future | `tests/compat.rs` |
//!
//! `async-compat` runs tokio's reactor and timers on a thread of its own:
//! every readiness event and timer of a tokio socket reaches the deliloop
//! task as a cross-thread wake (row H3 of `benches/compare` measures it
//! for an echo). deliloop's own [`net`](crate::net), [`time`](crate::time)
//! and [`io::Async`](crate::io::Async) are served in the loop's own
//! `epoll_wait`.
//!
//! # What not to do on the loop thread
//!
//! The loop runs every task, callback and timer of its thread; whatever
//! blocks one blocks them all.
//!
//! - Do not call a `block_on` (deliloop's, `futures::executor`'s or
//!   another runtime's) inside a task: it blocks the loop until its future
//!   completes, and a future that needs the loop never does. Await it, or
//!   [`spawn`](crate::spawn) it.
//! - Do not `std::thread::sleep`, or make a blocking call (a file read, a
//!   compression, a database call, a DNS lookup) on the loop: use
//!   [`time::sleep`](crate::time::sleep), or hand the work to
//!   [`spawn_blocking`](crate::spawn_blocking).
//!
//! [`Waker`]: std::task::Waker
