//! The four ways results reach the frame loop: deliloop's `Looper`
//! (`dispatch_ready_for`), the legacy queue (Android's pre-17 design: a
//! mutex and a sorted list), a `Mutex<VecDeque>` of boxed closures, and a
//! calloop channel driven by a calloop `EventLoop`. Each runs the same
//! frame loop under the same load.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::legacy::LegacyMessageQueue;
use deliloop::Looper;

use crate::frame_loop::{self, Clock, Frames};
use crate::load::{consume, Load, LOOP_CPU, RESULTS_RUN};

/// A result posted as a closure to run on the loop thread.
type Job = Box<dyn FnOnce() + Send>;

/// One implementation's run.
pub struct Outcome {
    pub name: &'static str,
    pub frames: Frames,
    /// Results the producers posted, and those the loop ran.
    pub posted: u64,
    pub run: u64,
    pub wall: Duration,
}

/// The implementations, by name, in the order they run.
pub const NAMES: [&str; 4] = [
    "deliloop",
    "legacy MessageQueue",
    "Mutex<VecDeque>",
    "calloop channel",
];

/// Runs implementation `name` for `vsyncs` vsyncs of the frame clock.
pub fn run(name: &'static str, vsyncs: u32) -> Outcome {
    let ran_before = RESULTS_RUN.load(Ordering::Relaxed);
    let started = Instant::now();
    let (frames, posted) = match name {
        "deliloop" => deliloop(Clock::new(vsyncs)),
        "legacy MessageQueue" => legacy(Clock::new(vsyncs)),
        "Mutex<VecDeque>" => mutex_deque(Clock::new(vsyncs)),
        "calloop channel" => calloop_channel(Clock::new(vsyncs)),
        _ => panic!("unknown implementation {name}"),
    };
    Outcome {
        name,
        frames,
        posted,
        run: RESULTS_RUN.load(Ordering::Relaxed) - ran_before,
        wall: started.elapsed(),
    }
}

fn deliloop(clock: Clock) -> (Frames, u64) {
    let looper = Looper::new().expect("a looper");
    let h = looper.handle();
    let load = Load::start(clock.end(), || {
        let h = h.clone();
        move |v| h.post(move || consume(v)).is_ok()
    });
    let f = frame_loop::run(clock, LOOP_CPU, |until| {
        looper.dispatch_ready_for(until.saturating_duration_since(Instant::now()));
    });
    h.quit();
    (f, load.stop())
}

fn legacy(clock: Clock) -> (Frames, u64) {
    let q: Arc<LegacyMessageQueue<Job>> = Arc::new(LegacyMessageQueue::new());
    let load = Load::start(clock.end(), || {
        let q = q.clone();
        move |v| {
            let job: Job = Box::new(move || consume(v));
            // Due now, as Android's `post` is: inserted after every entry
            // already due, walking the list under the lock.
            q.enqueue(job, q.now()).is_ok()
        }
    });
    let f = frame_loop::run(clock, LOOP_CPU, |until| {
        while Instant::now() < until {
            match q.poll(q.now()) {
                Some(job) => job(),
                None => break,
            }
        }
    });
    q.quit();
    (f, load.stop())
}

fn mutex_deque(clock: Clock) -> (Frames, u64) {
    let q: Arc<Mutex<VecDeque<Job>>> = Arc::new(Mutex::new(VecDeque::new()));
    let load = Load::start(clock.end(), || {
        let q = q.clone();
        move |v| {
            let job: Job = Box::new(move || consume(v));
            q.lock().unwrap().push_back(job);
            true
        }
    });
    let f = frame_loop::run(clock, LOOP_CPU, |until| {
        while Instant::now() < until {
            // Not `while let`: the guard would live through the job.
            let job = q.lock().unwrap().pop_front();
            match job {
                Some(job) => job(),
                None => break,
            }
        }
    });
    (f, load.stop())
}

/// The calloop loop's state: the frame's budget end, and the messages
/// that arrived after it, run first next frame (calloop's channel hands
/// over up to 1,024 messages per dispatch and cannot stop early).
struct CalloopFrame {
    until: Instant,
    deferred: VecDeque<Job>,
    got: usize,
}

fn calloop_channel(clock: Clock) -> (Frames, u64) {
    use calloop::channel::{channel, Event};
    let mut event_loop: calloop::EventLoop<'static, CalloopFrame> =
        calloop::EventLoop::try_new().expect("a calloop event loop");
    let (tx, rx) = channel::<Job>();
    event_loop
        .handle()
        .insert_source(rx, |event, _, state: &mut CalloopFrame| {
            if let Event::Msg(job) = event {
                state.got += 1;
                if Instant::now() < state.until {
                    job();
                } else {
                    state.deferred.push_back(job);
                }
            }
        })
        .expect("insert the channel");
    let load = Load::start(clock.end(), || {
        let tx = tx.clone();
        move |v| {
            let job: Job = Box::new(move || consume(v));
            tx.send(job).is_ok()
        }
    });
    drop(tx);
    let mut state = CalloopFrame {
        until: Instant::now(),
        deferred: VecDeque::new(),
        got: 0,
    };
    let f = frame_loop::run(clock, LOOP_CPU, |until| {
        state.until = until;
        while Instant::now() < until {
            match state.deferred.pop_front() {
                Some(job) => job(),
                None => break,
            }
        }
        while state.deferred.is_empty() && Instant::now() < until {
            state.got = 0;
            event_loop
                .dispatch(Some(Duration::ZERO), &mut state)
                .expect("calloop dispatch");
            if state.got == 0 {
                break;
            }
        }
    });
    let posted = load.stop();
    (f, posted)
}
