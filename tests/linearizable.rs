//! Linearizability of the DeliQueue: many short concurrent histories, each
//! checked against the queue's sequential specification by an exhaustive
//! search (Wing & Gong, memoised on the linearized prefix and the model's
//! state, as in Lowe's "Testing for linearizability").
//!
//! A history: the consumer thread and two producers, 30 operations each,
//! started together. Every operation takes a stamp from one global SeqCst
//! counter before it starts and after it returns, which gives the real-time
//! order: an operation that returned before another started must come
//! first. Operations: push (due at `when`, with a tag; front pushes too),
//! `Ticket::cancel`, `remove_where(tag == k)`, and on the consumer
//! `pop_due(t)`; after the threads end, a final `drain`.
//!
//! The sequential specification is an ordered map `(when, seq) -> id`:
//! a push inserts with the next `seq` (front pushes at `(0, -n)`, newest
//! first); a cancel removes its item and says whether it was there;
//! `pop_due(t)` takes the first entry if it is due at `t`; `drain` returns
//! all entries in order. Two operations are not single atomic steps in the
//! queue, and the specification says so rather than calling them atomic:
//!
//! * `pop_due` sweeps new pushes in (one read of the stack's top) and then
//!   takes the first swept entry due at `t`: two steps, both inside its
//!   interval. A push that lands between them waits for the next pop.
//! * `remove_where` reads the top once and then visits each node on its
//!   own: its effect is one removal step per item, each inside its
//!   interval, of items present when it started; when it returns, none of
//!   the matching items present when it started is still there, and it
//!   counted exactly the ones it removed.
//!
//! ```sh
//! cargo test --release --test linearizable                # 2,000 histories (500 in debug)
//! DELILOOP_LIN_HISTORIES=100000 cargo test --release --test linearizable
//! # Under shuttle's schedules (3 x 20 operations, 500 histories; nearly
//! # every operation overlaps another, where real threads on two shared
//! # cores overlap rarely):
//! RUSTFLAGS="--cfg shuttle" cargo test --release --test linearizable
//! ```

use std::collections::{BTreeMap, HashSet};

use deliloop::queue::{DeliQueue, Push, Ticket};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[cfg(shuttle)]
use shuttle::sync::atomic::AtomicU64;
#[cfg(not(shuttle))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

const TAGS: u64 = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Push {
        id: usize,
        when: u64,
        tag: u64,
        front: bool,
    },
    Cancel {
        id: usize,
    },
    RemoveTag {
        tag: u64,
    },
    Pop {
        t: u64,
    },
    Drain,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ret {
    Unit,
    Bool(bool),
    Count(usize),
    Item(Option<usize>),
    Items(Vec<usize>),
}

#[derive(Clone, Debug)]
struct Op {
    thread: usize,
    call: Call,
    ret: Ret,
    inv: u64,
    res: u64,
}

/// One thread's operations, recorded. A short spin of varying length first
/// spreads each thread's operations so that the threads overlap more (it
/// waits for nothing).
fn record(
    clock: &AtomicU64,
    thread: usize,
    log: &mut Vec<Op>,
    call: Call,
    f: impl FnOnce() -> Ret,
) {
    if cfg!(not(shuttle)) {
        let spins = (clock.load(SeqCst) as usize * 7 + log.len() * 13 + thread * 31) % 512;
        for _ in 0..spins {
            std::hint::spin_loop();
        }
    }
    let inv = clock.fetch_add(1, SeqCst);
    let ret = f();
    let res = clock.fetch_add(1, SeqCst);
    log.push(Op {
        thread,
        call,
        ret,
        inv,
        res,
    });
}

/// A producer's (or the consumer's) own pushes and cancels.
struct Actor {
    thread: usize,
    next: usize,
    tickets: Vec<(usize, Ticket<usize>)>,
    log: Vec<Op>,
}

impl Actor {
    fn new(thread: usize) -> Actor {
        Actor {
            thread,
            next: 0,
            tickets: Vec::new(),
            log: Vec::new(),
        }
    }

    fn push(&mut self, clock: &AtomicU64, p: &deliloop::queue::Producer<usize>, rng: &mut StdRng) {
        let id = self.thread * 1000 + self.next;
        self.next += 1;
        let front = rng.gen_ratio(1, 8);
        let when = if front { 0 } else { rng.gen_range(0..40) };
        let tag = rng.gen_range(0..TAGS);
        let opts = if front { Push::front() } else { Push::at(when) }.tag(tag);
        let mut ticket = None;
        record(
            clock,
            self.thread,
            &mut self.log,
            Call::Push {
                id,
                when,
                tag,
                front,
            },
            || {
                ticket = Some(p.push_cancellable(id, opts).expect("never closed").0);
                Ret::Unit
            },
        );
        self.tickets.push((id, ticket.unwrap()));
    }

    fn cancel(&mut self, clock: &AtomicU64, rng: &mut StdRng) {
        if self.tickets.is_empty() {
            return;
        }
        let (id, t) = &self.tickets[rng.gen_range(0..self.tickets.len())];
        record(
            clock,
            self.thread,
            &mut self.log,
            Call::Cancel { id: *id },
            || Ret::Bool(t.cancel()),
        );
    }
}

fn producer_ops(
    clock: &AtomicU64,
    p: &deliloop::queue::Producer<usize>,
    thread: usize,
    seed: u64,
    n: usize,
) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut a = Actor::new(thread);
    for _ in 0..n {
        match rng.gen_range(0..10) {
            0..=5 => a.push(clock, p, &mut rng),
            6..=8 => a.cancel(clock, &mut rng),
            _ => {
                let tag = rng.gen_range(0..TAGS);
                record(clock, thread, &mut a.log, Call::RemoveTag { tag }, || {
                    Ret::Count(p.remove_where(|i| i.tag() == Some(tag)))
                });
            }
        }
    }
    a.log
}

fn consumer_ops(clock: &AtomicU64, q: &mut DeliQueue<usize>, seed: u64, n: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let p = q.producer();
    let mut a = Actor::new(0);
    for _ in 0..n {
        match rng.gen_range(0..10) {
            0..=5 => {
                let t = rng.gen_range(0..50);
                record(clock, 0, &mut a.log, Call::Pop { t }, || {
                    Ret::Item(q.pop_due(t).map(|e| e.item))
                });
            }
            6..=7 => a.push(clock, &p, &mut rng),
            _ => a.cancel(clock, &mut rng),
        }
    }
    a.log
}

/// The sequential specification's state: entries in `(when, seq)` order,
/// each with whether a sweep has seen it.
#[derive(Clone, Debug, Default)]
struct Model {
    map: BTreeMap<(u64, i64), (usize, u64, bool)>,
    up: i64,
    down: i64,
}

impl Model {
    fn find(&self, id: usize) -> Option<(u64, i64)> {
        self.map.iter().find(|(_, v)| v.0 == id).map(|(k, _)| *k)
    }

    /// Only the order of the entries matters for what comes next (new
    /// `seq`s are past every existing one), so that is the memo key.
    fn canonical(&self) -> Vec<(usize, bool)> {
        self.map.values().map(|v| (v.0, v.2)).collect()
    }
}

/// Per operation: how far it got in the linearization being built, and
/// for an open `remove_where`, what it saw when it started and how many
/// it removed since.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct Progress {
    stage: u8,
    snapshot: Vec<usize>,
    removed: usize,
}

fn stages(c: &Call) -> u8 {
    match c {
        Call::Pop { .. } | Call::RemoveTag { .. } => 2,
        _ => 1,
    }
}

/// A configuration of the search: each operation's progress and the
/// model's order of entries.
type Config = (Vec<Progress>, Vec<(usize, bool)>);

struct Checker<'a> {
    ops: &'a [Op],
    seen: HashSet<Config>,
    steps: u64,
}

impl Checker<'_> {
    fn search(&mut self, model: &Model, prog: &mut Vec<Progress>) -> bool {
        self.steps += 1;
        let open: Vec<usize> = (0..self.ops.len())
            .filter(|&i| prog[i].stage < stages(&self.ops[i].call))
            .collect();
        if open.is_empty() {
            return true;
        }
        if !self.seen.insert((prog.clone(), model.canonical())) {
            return false;
        }
        let min_res = open.iter().map(|&i| self.ops[i].res).min().unwrap();
        for &i in &open {
            let op = &self.ops[i];
            if op.inv > min_res {
                continue;
            }
            for (next, p) in self.step(model, &prog[i], op) {
                let saved = std::mem::replace(&mut prog[i], p);
                if self.search(&next, prog) {
                    return true;
                }
                prog[i] = saved;
            }
        }
        false
    }

    /// The possible next steps of `op`: the model after each, and the
    /// operation's progress.
    fn step(&self, m: &Model, p: &Progress, op: &Op) -> Vec<(Model, Progress)> {
        let done = |q: &Progress| Progress {
            stage: q.stage + 1,
            ..q.clone()
        };
        match (&op.call, p.stage) {
            (
                &Call::Push {
                    id,
                    when,
                    tag,
                    front,
                },
                0,
            ) => {
                let mut m = m.clone();
                let key = if front {
                    m.down -= 1;
                    (0, m.down)
                } else {
                    m.up += 1;
                    (when, m.up)
                };
                m.map.insert(key, (id, tag, false));
                vec![(m, done(p))]
            }
            (&Call::Cancel { id }, 0) => {
                let mut m = m.clone();
                let was = m.find(id).and_then(|k| m.map.remove(&k)).is_some();
                if op.ret != Ret::Bool(was) {
                    return vec![];
                }
                vec![(m, done(p))]
            }
            // The sweep: everything pushed so far becomes visible to pops.
            (Call::Pop { .. }, 0) => {
                let mut m = m.clone();
                m.map.values_mut().for_each(|v| v.2 = true);
                vec![(m, done(p))]
            }
            (&Call::Pop { t }, 1) => {
                let mut m = m.clone();
                let first = m.map.iter().find(|(_, v)| v.2).map(|(k, v)| (*k, v.0));
                let got = match first {
                    Some((k, id)) if k.0 <= t => {
                        m.map.remove(&k);
                        Some(id)
                    }
                    _ => None,
                };
                if op.ret != Ret::Item(got) {
                    return vec![];
                }
                vec![(m, done(p))]
            }
            // The walk starts: the matching items present now are the ones
            // it may remove.
            (&Call::RemoveTag { tag }, 0) => {
                let snapshot = m.map.values().filter(|v| v.1 == tag).map(|v| v.0).collect();
                vec![(
                    m.clone(),
                    Progress {
                        stage: 1,
                        snapshot,
                        removed: 0,
                    },
                )]
            }
            (Call::RemoveTag { .. }, 1) => {
                let Ret::Count(k) = op.ret else {
                    unreachable!()
                };
                let mut out = Vec::new();
                // It returns: none of what it saw is left, and it counted
                // exactly what it removed.
                if p.removed == k && p.snapshot.iter().all(|&id| m.find(id).is_none()) {
                    out.push((m.clone(), done(p)));
                }
                // Or it removes one more of what it saw.
                if p.removed < k {
                    for &id in &p.snapshot {
                        if let Some(key) = m.find(id) {
                            let mut m = m.clone();
                            m.map.remove(&key);
                            let q = Progress {
                                removed: p.removed + 1,
                                ..p.clone()
                            };
                            out.push((m, q));
                        }
                    }
                }
                out
            }
            (Call::Drain, 0) => {
                let all: Vec<usize> = m.map.values().map(|v| v.0).collect();
                if op.ret != Ret::Items(all) {
                    return vec![];
                }
                vec![(Model::default(), done(p))]
            }
            _ => unreachable!("no such stage"),
        }
    }
}

/// Whether the history has a linearization, and how many search steps it
/// took.
fn linearizable(ops: &[Op]) -> (bool, u64) {
    let mut c = Checker {
        ops,
        seen: HashSet::new(),
        steps: 0,
    };
    let mut prog = vec![Progress::default(); ops.len()];
    let ok = c.search(&Model::default(), &mut prog);
    (ok, c.steps)
}

/// Runs one history: the consumer here, two producers on `spawn`ed threads.
fn history<J>(
    seed: u64,
    n: usize,
    spawn: impl Fn(Box<dyn FnOnce() -> Vec<Op> + Send>) -> J,
    join: impl Fn(J) -> Vec<Op>,
    start: impl FnOnce(),
) -> Vec<Op> {
    let clock = Arc::new(AtomicU64::new(0));
    let mut q = DeliQueue::new();
    let producers: Vec<J> = (1..=2)
        .map(|thread| {
            let (p, clock) = (q.producer(), clock.clone());
            spawn(Box::new(move || {
                producer_ops(&clock, &p, thread, seed ^ (thread as u64 * 0x9e37_79b9), n)
            }))
        })
        .collect();
    start();
    let mut ops = consumer_ops(&clock, &mut q, seed, n);
    for j in producers {
        ops.extend(join(j));
    }
    record(&clock, 0, &mut ops, Call::Drain, || {
        Ret::Items(q.drain().into_iter().map(|e| e.item).collect())
    });
    ops
}

fn check_history(seed: u64, ops: &[Op]) -> u64 {
    let (ok, steps) = linearizable(ops);
    if !ok {
        let mut sorted = ops.to_vec();
        sorted.sort_by_key(|o| o.inv);
        let lines: Vec<String> = sorted
            .iter()
            .map(|o| {
                format!(
                    "  [{:>3}, {:>3}] t{} {:?} -> {:?}",
                    o.inv, o.res, o.thread, o.call, o.ret
                )
            })
            .collect();
        panic!("history {seed} is not linearizable:\n{}", lines.join("\n"));
    }
    steps
}

/// Operations that overlap one of another thread.
fn overlapping(ops: &[Op]) -> u64 {
    ops.iter()
        .filter(|a| {
            ops.iter()
                .any(|b| a.thread != b.thread && a.inv < b.res && b.inv < a.res)
        })
        .count() as u64
}

#[cfg(not(shuttle))]
#[test]
fn queue_histories_are_linearizable() {
    let histories: u64 = std::env::var("DELILOOP_LIN_HISTORIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(miri) {
            3
        } else if cfg!(debug_assertions) {
            500
        } else {
            2_000
        });
    let n = if cfg!(miri) { 8 } else { 30 };
    let (mut steps, mut max_steps, mut overlapped) = (0, 0, 0);
    for seed in 0..histories {
        // All three start together: each counts itself in and waits
        // (yielding) for the others, so no thread runs its operations
        // before another has even started.
        let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let go = |ready: &std::sync::atomic::AtomicUsize| {
            ready.fetch_add(1, SeqCst);
            while ready.load(SeqCst) < 3 {
                std::thread::yield_now();
            }
        };
        let ops = history(
            seed,
            n,
            |f| {
                let ready = ready.clone();
                std::thread::spawn(move || {
                    go(&ready);
                    f()
                })
            },
            |j| j.join().unwrap(),
            || go(&ready),
        );
        let s = check_history(seed, &ops);
        steps += s;
        max_steps = max_steps.max(s);
        overlapped += overlapping(&ops);
    }
    eprintln!(
        "{histories} histories of 3 threads x {n} operations: all linearizable; \
         {overlapped} operations overlapped one of another thread; search steps {steps} in all, at most {max_steps} for one"
    );
}

#[cfg(shuttle)]
#[test]
fn queue_histories_are_linearizable_under_shuttle() {
    let histories: usize = std::env::var("DELILOOP_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let mut config = shuttle::Config::new();
    config.stack_size = 1 << 20;
    let runner = shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(histories), config);
    static OVERLAPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static STEPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    runner.run(|| {
        let seed: u64 = shuttle::rand::Rng::gen(&mut shuttle::rand::thread_rng());
        let ops = history(
            seed,
            20,
            shuttle::thread::spawn,
            |j| j.join().unwrap(),
            || {},
        );
        STEPS.fetch_add(check_history(seed, &ops), SeqCst);
        OVERLAPPED.fetch_add(overlapping(&ops), SeqCst);
    });
    eprintln!(
        "{histories} shuttle histories of 3 threads x 20 operations: all linearizable; \
         {} operations overlapped one of another thread; search steps {} in all",
        OVERLAPPED.load(SeqCst),
        STEPS.load(SeqCst)
    );
}
