//! Trace export (feature `trace`): Chrome trace-event JSON, which
//! Perfetto's UI (ui.perfetto.dev) and `chrome://tracing` open. Like
//! Perfetto's "mq" category on Android:
//!
//! * a slice (`"ph": "X"`) per dispatched entry, named by its kind, with its
//!   tag and due time in `args`, on the loop thread's track;
//! * a counter track (`"ph": "C"`) of the backlog, once per batch;
//! * instant events (`"ph": "i"`) for wake-ups (on the posting thread) and
//!   parks (on the loop thread);
//! * flow events from the posting thread (`"ph": "s"`, at the post) to the
//!   dispatch (`"ph": "f"`, at the slice's start), so Perfetto draws an
//!   arrow from each `post` to where it ran.
//!
//! Recording costs a relaxed load per post while no trace runs; while one
//! runs, every post and dispatch takes a mutex to append an event.
//! [`Looper::start_trace`] starts it; the file is written when the
//! [`TraceGuard`] is dropped (or [`TraceGuard::finish`] is called).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Weak;
use std::sync::{Arc, Mutex};

use crate::runtime::core::Core;
use crate::runtime::remote::Remote;
use crate::stats::Dispatch;
use crate::sync::{AtomicU64, Ordering};
use crate::Looper;
use std::cell::RefCell;

struct Event {
    name: &'static str,
    ph: char,
    /// Microseconds since the clock origin the process's loopers share.
    ts: f64,
    tid: i64,
    dur: Option<f64>,
    id: Option<u64>,
    args: Option<String>,
}

/// A trace being recorded, shared by the loop and posting threads.
pub(crate) struct Recorder {
    events: Mutex<Vec<Event>>,
    next_flow: AtomicU64,
}

/// The kernel's id of this thread, as `ps -L` and profilers show it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn tid() -> i64 {
    thread_local! {
        // SAFETY: a plain syscall with no arguments.
        static TID: i64 = unsafe { libc::syscall(libc::SYS_gettid) } as i64;
    }
    TID.with(|t| *t)
}

/// A number of this thread, unique in the process: the order in which
/// threads first record a trace event (where there is no `gettid`).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn tid() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static NEXT: AtomicI64 = AtomicI64::new(1);
    thread_local! {
        static TID: i64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TID.with(|t| *t)
}

fn us(ticks: u64) -> f64 {
    ticks as f64 / 1000.0
}

impl Recorder {
    fn push(&self, e: Event) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }
}

/// A posted closure carrying the flow id of its post.
pub(crate) struct Traced<F> {
    pub(crate) flow: u64,
    pub(crate) f: F,
}

impl<F: FnOnce() + Send + 'static> crate::runtime::posted::Message for Traced<F> {
    fn run(self) {
        (self.f)()
    }
    fn into_any(self) -> Box<dyn std::any::Any + Send> {
        Box::new(self.f)
    }
    fn flow(&self) -> Option<u64> {
        Some(self.flow)
    }
}

/// On the posting thread: while a trace records, starts a flow for this
/// post and returns its id.
#[inline]
pub(crate) fn flow_start(remote: &Remote) -> Option<u64> {
    if !remote.tracing.load(Ordering::Relaxed) {
        return None;
    }
    flow_start_recording(remote)
}

/// [`flow_start`] while a trace records: kept out of line so that a post
/// pays only the flag's load when none does.
#[cold]
#[inline(never)]
fn flow_start_recording(remote: &Remote) -> Option<u64> {
    let rec = remote
        .trace
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()?;
    let id = rec.next_flow.fetch_add(1, Ordering::Relaxed) + 1;
    rec.push(Event {
        name: "post",
        ph: 's',
        ts: us(remote.now_ticks()),
        tid: tid(),
        dur: None,
        id: Some(id),
        args: None,
    });
    Some(id)
}

/// On the posting thread: a wake-up syscall, as an instant event.
#[inline]
pub(crate) fn wake_event(remote: &Remote) {
    if remote.tracing.load(Ordering::Relaxed) {
        wake_event_recording(remote);
    }
}

/// [`wake_event`] while a trace records.
#[cold]
#[inline(never)]
fn wake_event_recording(remote: &Remote) {
    if let Some(rec) = remote
        .trace
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        rec.push(Event {
            name: "wake",
            ph: 'i',
            ts: us(remote.now_ticks()),
            tid: tid(),
            dur: None,
            id: None,
            args: None,
        });
    }
}

/// The trace a loop records into, if one is running: fed by the loop's
/// measurements (`runtime/measure.rs`) and its turns.
#[derive(Default)]
pub(crate) struct Tracer(RefCell<Option<Arc<Recorder>>>);

impl Tracer {
    fn recorder(&self) -> Option<Arc<Recorder>> {
        self.0.borrow().clone()
    }

    /// Starts (`Some`) or stops recording.
    pub(crate) fn set(&self, rec: Option<Arc<Recorder>>) {
        *self.0.borrow_mut() = rec;
    }

    /// A dispatched entry's slice, and the end of its post's flow.
    pub(crate) fn slice(&self, d: &Dispatch, start: u64, end: u64, flow: Option<u64>) {
        let Some(rec) = self.recorder() else { return };
        let tid = tid();
        if let Some(id) = flow {
            rec.push(Event {
                name: "post",
                ph: 'f',
                ts: us(start),
                tid,
                dur: None,
                id: Some(id),
                args: None,
            });
        }
        let args = match d.tag {
            Some(t) => format!("{{\"tag\":{},\"asynchronous\":{}}}", t.0, d.asynchronous),
            None => format!("{{\"asynchronous\":{}}}", d.asynchronous),
        };
        rec.push(Event {
            name: match d.kind {
                crate::stats::Kind::Task => "task",
                crate::stats::Kind::Timer => "timer",
                crate::stats::Kind::Message => "message",
                crate::stats::Kind::RunSync => "run_sync",
            },
            ph: 'X',
            ts: us(start),
            tid,
            dur: Some(us(end.saturating_sub(start))),
            id: None,
            args: Some(args),
        });
    }

    /// The backlog counter, once per batch.
    pub(crate) fn backlog(&self, now: u64, backlog: u64) {
        let Some(rec) = self.recorder() else { return };
        rec.push(Event {
            name: "backlog",
            ph: 'C',
            ts: us(now),
            tid: tid(),
            dur: None,
            id: None,
            args: Some(format!("{{\"backlog\":{backlog}}}")),
        });
    }

    /// The loop parks.
    pub(crate) fn park(&self, now: u64) {
        let Some(rec) = self.recorder() else { return };
        rec.push(Event {
            name: "park",
            ph: 'i',
            ts: us(now),
            tid: tid(),
            dur: None,
            id: None,
            args: None,
        });
    }
}

/// A running trace; dropping it (or [`finish`](TraceGuard::finish)) stops
/// recording and writes the file.
#[must_use = "the trace is written when the guard is dropped"]
pub struct TraceGuard {
    core: Weak<Core>,
    rec: Arc<Recorder>,
    path: PathBuf,
    done: bool,
}

impl std::fmt::Debug for TraceGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceGuard")
            .field("path", &self.path)
            .finish()
    }
}

impl TraceGuard {
    /// Stops recording and writes the trace.
    ///
    /// # Errors
    /// If the file cannot be written.
    pub fn finish(mut self) -> io::Result<()> {
        self.write()
    }

    fn write(&mut self) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        if let Some(core) = self.core.upgrade() {
            core.remote.tracing.store(false, Ordering::Relaxed);
            *core.remote.trace.lock().unwrap_or_else(|p| p.into_inner()) = None;
            core.stats.set_trace(None);
        }
        let mut events =
            std::mem::take(&mut *self.rec.events.lock().unwrap_or_else(|p| p.into_inner()));
        events.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        // Flows whose dispatch was not seen (still pending, or cancelled)
        // would dangle: keep only pairs.
        let ends: std::collections::HashSet<u64> = events
            .iter()
            .filter(|e| e.ph == 'f')
            .filter_map(|e| e.id)
            .collect();
        events.retain(|e| e.ph != 's' || e.id.is_some_and(|id| ends.contains(&id)));
        let pid = std::process::id();
        let mut w = BufWriter::new(File::create(&self.path)?);
        write!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            write!(
                w,
                "{{\"name\":\"{}\",\"cat\":\"mq\",\"ph\":\"{}\",\"ts\":{:.3},\"pid\":{},\"tid\":{}",
                e.name, e.ph, e.ts, pid, e.tid
            )?;
            if let Some(d) = e.dur {
                write!(w, ",\"dur\":{d:.3}")?;
            }
            if let Some(id) = e.id {
                write!(w, ",\"id\":{id}")?;
                if e.ph == 'f' {
                    w.write_all(b",\"bp\":\"e\"")?;
                }
            }
            if e.ph == 'i' {
                w.write_all(b",\"s\":\"t\"")?;
            }
            if let Some(a) = &e.args {
                write!(w, ",\"args\":{a}")?;
            }
            w.write_all(b"}")?;
        }
        writeln!(w, "]}}")?;
        w.flush()
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        let _ = self.write();
    }
}

impl Looper {
    /// Starts recording a trace of this loop to `path` (Chrome trace-event
    /// JSON, which Perfetto's UI opens; see [`crate::trace`]). While it
    /// records, every dispatch is timed. The file is written when the guard
    /// is dropped.
    ///
    /// # Errors
    /// If `path` cannot be created.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let path = std::env::temp_dir().join("deliloop-doc-trace.json");
    /// let looper = Looper::new().unwrap();
    /// let guard = looper.start_trace(&path).unwrap();
    /// looper.handle().post(|| {}).unwrap();
    /// looper.dispatch_ready();
    /// guard.finish().unwrap();
    /// let json = std::fs::read_to_string(&path).unwrap();
    /// assert!(json.contains("\"ph\":\"X\""));
    /// ```
    pub fn start_trace(&self, path: impl AsRef<Path>) -> io::Result<TraceGuard> {
        let path = path.as_ref().to_path_buf();
        File::create(&path)?;
        let rec = Arc::new(Recorder {
            events: Mutex::new(Vec::new()),
            next_flow: AtomicU64::new(0),
        });
        self.core.stats.set_trace(Some(rec.clone()));
        *self
            .core
            .remote
            .trace
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(rec.clone());
        self.core.remote.tracing.store(true, Ordering::Relaxed);
        Ok(TraceGuard {
            core: std::rc::Rc::downgrade(&self.core),
            rec,
            path,
            done: false,
        })
    }
}
