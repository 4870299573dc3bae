//! Randomised schedules of the whole runtime under shuttle: several
//! producer threads post, cancel, remove by tag and by predicate, post
//! sync barriers and remove them, post through backlog watermarks
//! (`post_async`, `PostError::Full`), quit and drop their handles, while
//! the loop runs, quits and is dropped. Paths loom cannot reach in
//! reasonable time (a loom model of this size never finishes).
//!
//! Shuttle preempts at every atomic and lock of `crate::sync`, on one OS
//! thread, with schedules picked at random (and by PCT); under
//! `--cfg shuttle` the loop parks in a stand-in made of shuttle's mutex and
//! condvar (`src/runtime/park_shuttle.rs`), everything else is the real
//! code. What each schedule checks, with exact counts:
//!
//! * every post is run once, or handed back (`PostError`), or dropped
//!   once: never two of these, never none;
//! * `posted = run + cancelled + removed + dropped on quit`, against the
//!   counts the producers saw (`MessageId::cancel`, `Handle::remove`,
//!   `Handle::remove_where`) and the looper's `Stats`;
//! * a cancelled message never runs; a refused one never runs;
//! * one producer's plain posts run in the order posted;
//! * a message posted behind a sync barrier never runs before the barrier
//!   is removed, and an asynchronous one posted behind it runs while it
//!   stands (otherwise its producer waits forever: shuttle reports the
//!   deadlock);
//! * with watermarks, the backlog never passes `high`, and every
//!   `post_async` ends (posted, or refused by quit).
//!
//! ```sh
//! RUSTFLAGS="--cfg shuttle" cargo test --release --test shuttle_runtime
//! DELILOOP_SHUTTLE_ITERATIONS=20000 RUSTFLAGS="--cfg shuttle" cargo test --release --test shuttle_runtime
//! ```
//! (`scripts/shuttle.sh` runs the long version.)
#![cfg(shuttle)]

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use deliloop::{Handle, Looper, MessageId, PostError, Tag};
use futures::FutureExt;
use shuttle::rand::{thread_rng, Rng};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::mpsc;
use shuttle::thread;

const PRODUCERS: usize = 4;
const OPS: usize = 16;
/// Ids per producer: each op posts at most 3 messages.
const IDS: usize = OPS * 3;
const FAR: Duration = Duration::from_secs(3600);

const RAN: u8 = 1;
const DROPPED: u8 = 2;

/// Schedules per test and scheduler (random, then PCT): quick by default,
/// `DELILOOP_SHUTTLE_ITERATIONS` for long runs.
fn iterations() -> usize {
    std::env::var("DELILOOP_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

fn config() -> shuttle::Config {
    let mut c = shuttle::Config::new();
    // The loop's frames (dispatch, quit, drop) need more than the default.
    c.stack_size = 1 << 20;
    c
}

/// Totals over every schedule of a test, printed at its end, to show what
/// the schedules reached.
#[derive(Default)]
struct Tally {
    schedules: AtomicUsize,
    accepted: AtomicUsize,
    ran: AtomicUsize,
    refused: AtomicUsize,
    cancelled: AtomicUsize,
    removed: AtomicUsize,
    dropped_on_quit: AtomicUsize,
    barriers: AtomicUsize,
    waited: AtomicUsize,
    releases: AtomicUsize,
}

/// Runs `f` under random schedules, then under PCT (depth 3).
fn check(name: &str, f: impl Fn(&Tally) + Send + Sync + 'static) {
    let tally = Arc::new(Tally::default());
    let f = Arc::new(f);
    let (g, t) = (f.clone(), tally.clone());
    shuttle::Runner::new(RandomScheduler::new(iterations()), config()).run(move || g(&t));
    let t = tally.clone();
    shuttle::Runner::new(PctScheduler::new(3, iterations()), config()).run(move || f(&t));
    let n = |a: &AtomicUsize| a.load(SeqCst);
    eprintln!(
        "{name}: {} schedules; messages accepted {}, ran {}, refused {}, cancelled {}, removed {}, \
         dropped on quit {}; barriers {}; post_async waits {}, releases {}",
        n(&tally.schedules),
        n(&tally.accepted),
        n(&tally.ran),
        n(&tally.refused),
        n(&tally.cancelled),
        n(&tally.removed),
        n(&tally.dropped_on_quit),
        n(&tally.barriers),
        n(&tally.waited),
        n(&tally.releases),
    );
}

/// What happened to every message: one slot per id, set once.
struct Ledger {
    slots: Vec<AtomicU8>,
    /// Last plain post of each producer that ran (its index + 1).
    last_plain: Vec<AtomicUsize>,
    /// The first violation seen inside a message (the loop catches panics
    /// there, so messages report here and the test fails at the end).
    violation: std::sync::Mutex<Option<String>>,
}

impl Ledger {
    fn new() -> Arc<Ledger> {
        Arc::new(Ledger {
            slots: (0..PRODUCERS * IDS).map(|_| AtomicU8::new(0)).collect(),
            last_plain: (0..PRODUCERS).map(|_| AtomicUsize::new(0)).collect(),
            violation: std::sync::Mutex::new(None),
        })
    }

    fn set(&self, id: usize, outcome: u8) {
        let prev = self.slots[id].swap(outcome, SeqCst);
        assert_eq!(
            prev, 0,
            "message {id}: outcome {outcome} after {prev} (run or dropped twice)"
        );
    }

    fn violated(&self, what: String) {
        self.violation.lock().unwrap().get_or_insert(what);
    }

    fn get(&self, id: usize) -> u8 {
        self.slots[id].load(SeqCst)
    }
}

/// Carried by every posted closure: marks the message run, or dropped if
/// the closure is dropped unrun.
struct Probe {
    id: usize,
    ledger: Arc<Ledger>,
    done: bool,
    /// Sent on when the message ran or was dropped.
    signal: Option<mpsc::Sender<()>>,
}

impl Probe {
    fn run(mut self) {
        self.done = true;
        self.ledger.set(self.id, RAN);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.done {
            self.ledger.set(self.id, DROPPED);
        }
        if let Some(s) = self.signal.take() {
            let _ = s.send(());
        }
    }
}

/// What one producer saw.
#[derive(Default)]
struct Seen {
    accepted: Vec<usize>,
    refused: Vec<usize>,
    cancelled: Vec<usize>,
    removed: usize,
    /// Barrier sequences completed.
    barriers: usize,
}

struct Producer {
    index: usize,
    handle: Handle,
    ledger: Arc<Ledger>,
    next: usize,
    seen: Seen,
    ids: Vec<(usize, MessageId)>,
    /// Index + 1 of this producer's last plain post (FIFO check).
    plain: usize,
    high: Option<usize>,
}

impl Producer {
    fn probe(&mut self) -> Probe {
        assert!(self.next < IDS, "ran out of ids");
        let id = self.index * IDS + self.next;
        self.next += 1;
        Probe {
            id,
            ledger: self.ledger.clone(),
            done: false,
            signal: None,
        }
    }

    fn record<F>(&mut self, id: usize, r: Result<MessageId, PostError<F>>, keep: bool) -> bool {
        match r {
            Ok(m) => {
                self.seen.accepted.push(id);
                if keep {
                    self.ids.push((id, m));
                }
                true
            }
            Err(e) => {
                // The closure comes back (and is dropped here, unrun).
                self.seen.refused.push(id);
                drop(e.into_inner());
                false
            }
        }
    }

    /// A plain post due now: runs in the order this producer posted.
    fn post_plain(&mut self) {
        let p = self.probe();
        let id = p.id;
        self.plain += 1;
        let (order, me) = (self.plain, self.index);
        let ledger = self.ledger.clone();
        let r = self.handle.post(move || {
            let prev = ledger.last_plain[me].swap(order, SeqCst);
            if prev >= order {
                ledger.violated(format!(
                    "producer {me}: plain post {order} ran after {prev}"
                ));
            }
            p.run();
        });
        self.record(id, r, true);
    }

    fn post_tagged(&mut self, tag: u64, delay: Duration) {
        let p = self.probe();
        let id = p.id;
        let r = self
            .handle
            .message(move || p.run())
            .tag(Tag(tag))
            .delay(delay)
            .post();
        self.record(id, r, true);
    }

    fn post_front(&mut self) {
        let p = self.probe();
        let id = p.id;
        let r = self.handle.post_at_front(move || p.run());
        self.record(id, r, false);
    }

    fn cancel_one(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let i = thread_rng().gen_range(0..self.ids.len());
        let (id, m) = self.ids.swap_remove(i);
        if m.cancel() {
            self.seen.cancelled.push(id);
            assert!(!m.cancel(), "a second cancel won too");
        }
    }

    /// Barrier, then a sync message S and an asynchronous one A behind it;
    /// waits until A ran (or was dropped by quit), then removes the
    /// barrier. S must not run before that.
    fn barrier_sequence(&mut self) {
        let Ok(token) = self.handle.post_sync_barrier() else {
            return;
        };
        let lifted = Arc::new(AtomicBool::new(false));
        let s = self.probe();
        let s_id = s.id;
        let (l, ledger) = (lifted.clone(), self.ledger.clone());
        let r = self.handle.post(move || {
            if !l.load(SeqCst) {
                ledger.violated(format!("message {s_id} ran while its sync barrier stood"));
            }
            s.run();
        });
        self.record(s_id, r, false);
        let (tx, rx) = mpsc::channel();
        let mut a = self.probe();
        a.signal = Some(tx);
        let a_id = a.id;
        let r = self
            .handle
            .message(move || a.run())
            .asynchronous()
            .tag(Tag(9))
            .post();
        self.record(a_id, r, false);
        // Ends once A ran or was dropped (a refused A was dropped already).
        let _ = rx.recv();
        lifted.store(true, SeqCst);
        let removed = self.handle.remove_sync_barrier(token);
        // Quit may have drained it first; otherwise it was there to remove.
        assert!(removed.is_ok() || self.handle.is_quit());
        self.seen.barriers += 1;
    }

    /// With watermarks: waits for room, or gives up after one poll (the
    /// waiter leaves the queue of waiters).
    fn post_async(&mut self, wait: bool) {
        let p = self.probe();
        let id = p.id;
        let fut = self.handle.post_async(move || p.run());
        let r = if wait {
            Some(shuttle::future::block_on(fut))
        } else {
            fut.now_or_never()
        };
        match r {
            Some(r) => {
                self.record(id, r, true);
            }
            // Dropped while waiting: the closure went with it, unrun.
            None => self.seen.refused.push(id),
        }
    }

    fn check_backlog(&self) {
        if let Some(high) = self.high {
            let b = self.handle.backlog();
            assert!(b <= high, "backlog {b} above the high watermark {high}");
        }
    }
}

struct Scenario {
    watermarks: Option<(usize, usize)>,
    /// Producers may quit (or quit safely) at random, not only at the end.
    random_quit: bool,
    barriers: bool,
}

fn scenario(s: &'static Scenario, tally: &Tally) {
    let builder = match s.watermarks {
        Some((low, high)) => Looper::builder().backlog_watermarks(low, high),
        None => Looper::builder(),
    };
    let looper = builder.build().unwrap();
    let ledger = Ledger::new();
    let finished = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|index| {
            let mut p = Producer {
                index,
                handle: looper.handle(),
                ledger: ledger.clone(),
                next: 0,
                seen: Seen::default(),
                ids: Vec::new(),
                plain: 0,
                high: s.watermarks.map(|w| w.1),
            };
            let finished = finished.clone();
            thread::spawn(move || {
                let mut rng = thread_rng();
                for _ in 0..OPS {
                    match rng.gen_range(0..20) {
                        0..=4 => p.post_plain(),
                        5..=6 => p.post_tagged(rng.gen_range(0..3), Duration::ZERO),
                        // Delayed messages hold their room under watermarks
                        // until quit: there, waiters could wait for ever.
                        7..=8 if s.watermarks.is_none() => p.post_tagged(rng.gen_range(0..3), FAR),
                        9 => p.post_front(),
                        10..=11 => p.cancel_one(),
                        12 => p.seen.removed += p.handle.remove(Tag(rng.gen_range(0..3))),
                        13 => {
                            let k = rng.gen_range(0..3);
                            p.seen.removed += p.handle.remove_where(|i| i.tag() == Some(Tag(k)));
                        }
                        14..=15 if s.barriers => p.barrier_sequence(),
                        16..=17 if s.watermarks.is_some() => p.post_async(rng.gen_bool(0.7)),
                        18 if s.random_quit => {
                            if rng.gen_bool(0.5) {
                                p.handle.quit();
                            } else {
                                p.handle.quit_safely();
                            }
                        }
                        _ => p.post_plain(),
                    }
                    p.check_backlog();
                }
                // Tickets go first, then the handle, racing with the loop.
                let Producer {
                    handle, ids, seen, ..
                } = p;
                drop(ids);
                if finished.fetch_add(1, SeqCst) + 1 == PRODUCERS {
                    handle.quit();
                }
                drop(handle);
                seen
            })
        })
        .collect();

    looper.run();
    let stats = looper.stats();
    // Drop the looper before or after the producers finish.
    let early_drop = thread_rng().gen_bool(0.5);
    let looper = if early_drop {
        drop(looper);
        None
    } else {
        Some(looper)
    };
    let seen: Vec<Seen> = producers.into_iter().map(|t| t.join().unwrap()).collect();
    drop(looper);

    if let Some(v) = ledger.violation.lock().unwrap().take() {
        panic!("{v}");
    }
    assert_eq!(stats.message_panics, 0);
    let accepted: usize = seen.iter().map(|s| s.accepted.len()).sum();
    let cancelled: usize = seen.iter().map(|s| s.cancelled.len()).sum();
    let removed: usize = seen.iter().map(|s| s.removed).sum();
    let mut ran = 0;
    for s in &seen {
        for &id in &s.accepted {
            match ledger.get(id) {
                RAN => ran += 1,
                DROPPED => {}
                o => panic!("accepted message {id} neither ran nor was dropped ({o})"),
            }
        }
        for &id in s.refused.iter().chain(&s.cancelled) {
            assert_eq!(
                ledger.get(id),
                DROPPED,
                "message {id}: refused or cancelled, yet it ran"
            );
        }
    }
    assert_eq!(stats.posted as usize, accepted, "{stats:?}");
    assert_eq!(stats.messages_run as usize, ran, "{stats:?}");
    assert_eq!(
        accepted,
        ran + cancelled + removed + stats.messages_dropped as usize,
        "posted = run + cancelled + removed + dropped ({ran} + {cancelled} + {removed} + {})",
        stats.messages_dropped
    );
    if let Some((_, high)) = s.watermarks {
        assert!(stats.backlog_peak as usize <= high, "{stats:?}");
    }
    let refused: usize = seen.iter().map(|s| s.refused.len()).sum();
    let barriers: usize = seen.iter().map(|s| s.barriers).sum();
    for (a, v) in [
        (&tally.schedules, 1),
        (&tally.accepted, accepted),
        (&tally.ran, ran),
        (&tally.refused, refused),
        (&tally.cancelled, cancelled),
        (&tally.removed, removed),
        (&tally.dropped_on_quit, stats.messages_dropped as usize),
        (&tally.barriers, barriers),
        (&tally.waited, stats.waited as usize),
        (&tally.releases, stats.releases as usize),
    ] {
        a.fetch_add(v, SeqCst);
    }
}

#[test]
fn posts_cancels_removals_and_quit_account_for_every_message() {
    const NAME: &str = "posts_cancels_removals_and_quit_account_for_every_message";
    static S: Scenario = Scenario {
        watermarks: None,
        random_quit: true,
        barriers: false,
    };
    check(NAME, |t| scenario(&S, t));
}

#[test]
fn sync_barriers_hold_sync_messages_and_pass_asynchronous_ones() {
    const NAME: &str = "sync_barriers_hold_sync_messages_and_pass_asynchronous_ones";
    static S: Scenario = Scenario {
        watermarks: None,
        random_quit: false,
        barriers: true,
    };
    check(NAME, |t| scenario(&S, t));
}

#[test]
fn watermarks_bound_the_backlog_and_release_every_waiter() {
    const NAME: &str = "watermarks_bound_the_backlog_and_release_every_waiter";
    static S: Scenario = Scenario {
        watermarks: Some((1, 3)),
        random_quit: false,
        barriers: true,
    };
    check(NAME, |t| scenario(&S, t));
}

#[test]
fn watermarks_racing_quit_hand_every_waiter_its_closure_back() {
    const NAME: &str = "watermarks_racing_quit_hand_every_waiter_its_closure_back";
    static S: Scenario = Scenario {
        watermarks: Some((1, 3)),
        random_quit: true,
        barriers: true,
    };
    check(NAME, |t| scenario(&S, t));
}
