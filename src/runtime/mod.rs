//! The runtime: one loop thread over one DeliQueue.
//!
//! Layering: the queue (the crate `deliloop-queue`, `crate::queue`) knows
//! nothing of the runtime, and the compiler keeps it so; this module builds
//! the loop on its public API; `crate::time`, the reactor and embedding
//! build on this module.
//!
//! The loop's state is `Core` (`core.rs`), one part per concern, each
//! owned by the module that defines it; the `impl Core` blocks that drive
//! them are all in this module.
//!
//! | file | what it holds |
//! |---|---|
//! | `looper.rs` | the public `Looper`: `run`, `block_on`, `turn`, quit, drop |
//! | `builder.rs` | `Builder`: the loop's configuration |
//! | `core.rs` | `Core`, the loop thread's state, and what its parts share |
//! | `turn.rs` | a turn: dispatch, or park (`Parking`: parker, spin, early wake) |
//! | `dispatch.rs` | a batch: local tasks and due entries (`Batching`: budget, fairness) |
//! | `host.rs` | a host call of an embedded loop (`dispatch_ready`), arming the fd |
//! | `io.rs` | the loop's side of the reactor: readiness delivered per turn |
//! | `idle.rs` | idle handlers (`Idle`) and message logging (`MessageLog`) |
//! | `measure.rs` | `Stats`: counters, pressure, sampled histograms, slow logs, observer, trace |
//! | `report.rs` | `Looper::stats` and `Looper::pressure`: what `Stats` reports |
//! | `quit.rs` | quit: drain, run what `quit_safely` allows, cancel tasks (`QuitState`) |
//! | `remote.rs` | `Remote`, what every thread shares with a loop |
//! | `handle.rs` | the public `Handle` on top of `Remote` |
//! | `flood.rs` | flood control (watermarks, `post_async`) and the loop's `Backlog` |
//! | `barrier.rs` | Android's sync barriers |
//! | `message.rs` | what the queue carries (`Entry`) and the message API |
//! | `posted.rs` | a posted closure, inline in its node when small |
//! | `run_sync.rs` | `Handle::run_sync`: run a closure on the loop and wait for it |
//! | `task.rs` | tasks on async-task: spawning, registration, `Task` |
//! | `tasks.rs` | `Tasks`: the local run queue, live tasks, finished remote tasks |
//! | `task_free.rs` | finished remote tasks held in batches for their spawners |
//! | `task_return.rs` | the hand-over of those batches to the spawning threads |
//! | `share.rs` | a task's counted reference to its loop, released without an RMW on the loop thread |
//! | `context.rs` | which loop runs on this thread |
//! | `global.rs` | the crate-level `block_on`, `spawn`, `spawn_local` |
//! | `park.rs` | the poll, its waker and its timer; the timer per platform in `park/` (`park_shuttle.rs` under `--cfg shuttle`) |
//! | `instant_clock.rs` | the loop's clock where `Instant` does not read `CLOCK_MONOTONIC` (Apple's systems, Windows) |

mod barrier;
mod builder;
pub(crate) mod context;
pub(crate) mod core;
mod dispatch;
pub(crate) mod flood;
pub(crate) mod global;
mod handle;
mod host;
mod idle;
#[cfg(any(target_vendor = "apple", windows))]
mod instant_clock;
mod io;
mod looper;
mod measure;
pub(crate) mod message;
// Under `--cfg shuttle`, a parker shuttle can schedule (park_shuttle.rs).
#[cfg_attr(shuttle, path = "park_shuttle.rs")]
mod park;
mod paused;
pub(crate) mod posted;
mod quit;
pub(crate) mod remote;
mod report;
mod run_sync;
pub(crate) mod share;
mod task;
mod task_free;
pub(crate) mod task_return;
pub(crate) mod tasks;
pub(crate) mod turn;

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
