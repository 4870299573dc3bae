//! The runtime: one loop thread over one DeliQueue.
//!
//! Layering: the queue (the crate `deliloop-queue`, `crate::queue`) knows
//! nothing of the runtime, and the compiler keeps it so; this module builds
//! the loop on its public API; `crate::time`, the reactor and embedding
//! build on this module.
//!
//! * `looper.rs`: the public `Looper`; `builder.rs`: its configuration.
//! * `core.rs`: `Core`, the loop thread's state; `turn.rs`: a turn (park,
//!   host arming); `dispatch.rs`: running due entries; `quit.rs`: quit.
//! * `remote.rs`: `Remote`, what every thread shares with a loop;
//!   `handle.rs`: the public `Handle` on top of it.
//! * `message.rs`: what the queue carries and the message API;
//!   `posted.rs`: a posted closure, inline in its node when small; `task.rs`:
//!   tasks on async-task; `context.rs`: which loop runs on this thread;
//!   `share.rs`: a task's counted reference to its loop, released on the
//!   loop thread without an RMW;
//!   `park.rs`: epoll, eventfd and timerfd; `global.rs`: the crate-level
//!   `block_on`, `spawn`, `spawn_local`.

mod barrier;
mod builder;
pub(crate) mod context;
pub(crate) mod core;
mod dispatch;
pub(crate) mod flood;
pub(crate) mod global;
mod handle;
mod idle;
mod looper;
mod measure;
pub(crate) mod message;
// Under `--cfg shuttle`, a parker shuttle can schedule (park_shuttle.rs).
#[cfg_attr(shuttle, path = "park_shuttle.rs")]
mod park;
pub(crate) mod posted;
mod quit;
pub(crate) mod remote;
mod report;
mod run_sync;
pub(crate) mod share;
mod task;
mod task_free;
pub(crate) mod task_return;
mod turn;

pub use barrier::{BarrierToken, UnknownBarrier};
pub use builder::{Builder, DEFAULT_BUDGET};
pub use flood::PostAsync;
pub use global::{block_on, spawn, spawn_local};
pub use handle::Handle;
pub use idle::{IdleId, Printer};
pub use looper::Looper;
pub use message::{MessageBuilder, MessageId, MessageInfo, Tag};
// Used by the deadline clock where it reads the TSC, and by its tests.
#[allow(unused_imports)]
pub(crate) use remote::monotonic_ns;
pub use task::Task;
pub use turn::Turn;
