//! A soak of every feature at once, for `scripts/soak.sh [seconds]`.
//!
//! `cargo run --release --example soak -- [SECONDS]` (default 600). It
//! runs one looper with backlog watermarks and, together:
//!
//! * three producer threads posting closures (due now, delayed up to
//!   10 ms, tagged, at the front), through `post` (a refusal at the high
//!   watermark hands the closure back) and `post_async` (waits for room),
//!   each cancelling some of its recent posts by `MessageId`;
//! * a remover thread: `remove(tag)` and `remove_where` with a predicate;
//! * a barrier thread: a sync barrier, asynchronous messages that pass it,
//!   ordinary ones held behind it, the barrier removed; and `run_sync`;
//! * tasks on the loop: an interval, sleeps reset both ways and dropped
//!   before they fire, timeouts, delayed tasks (half dropped before they
//!   start);
//! * sockets: a TCP echo server on the loop and four clients on the loop
//!   that open a connection, echo a few hundred messages, check every byte
//!   and close, over and over.
//!
//! Every 10 s it prints the RSS (`VmRSS` of /proc/self/status), limbo and
//! backlog with the counters. It fails (exit status 1) if the RSS or the
//! limbo peak grows by more than 5% from the end of warm-up (the first
//! minute; a third of the run when that is shorter than three minutes) to
//! the end, or if any count disagrees at the end: `posted = run +
//! cancelled + removed + dropped` from `Looper::stats`, and each of those
//! against what the producers and payloads counted themselves.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deliloop::net::{TcpListener, TcpStream};
use deliloop::time::{interval, sleep, timeout};
use deliloop::{Handle, Looper, MessageId, PostError, Tag};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Counts kept by the producers and payloads, to check `Stats` against.
#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    ran: AtomicU64,
    /// Payloads dropped without running: cancelled, removed, dropped by
    /// quit, or handed back by a refused post.
    unrun: AtomicU64,
    refused: AtomicU64,
    /// Posts refused for any reason (the closure came back and was dropped).
    handed_back: AtomicU64,
    cancels: AtomicU64,
    removes: AtomicU64,
    barriers: AtomicU64,
    run_syncs: AtomicU64,
}

/// A posted closure's payload: counts its run, or its drop unrun.
struct Token {
    counts: Arc<Counts>,
    ran: bool,
    _ballast: Vec<u8>,
}

impl Token {
    fn new(counts: &Arc<Counts>, rng: &mut StdRng) -> Token {
        Token {
            counts: counts.clone(),
            ran: false,
            _ballast: vec![0; rng.gen_range(0..256)],
        }
    }

    fn run(mut self) {
        self.ran = true;
        self.counts.ran.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if !self.ran {
            self.counts.unrun.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts the outcome of a post: a refused closure is dropped (unrun).
fn note<F>(counts: &Counts, r: Result<MessageId, PostError<F>>) -> Option<MessageId> {
    match r {
        Ok(id) => {
            counts.accepted.fetch_add(1, Ordering::Relaxed);
            Some(id)
        }
        Err(e) => {
            counts.handed_back.fetch_add(1, Ordering::Relaxed);
            if e.is_full() {
                counts.refused.fetch_add(1, Ordering::Relaxed);
            }
            drop(e.into_inner());
            None
        }
    }
}

fn producer(h: Handle, counts: Arc<Counts>, stop: Arc<AtomicBool>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut recent: VecDeque<MessageId> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..100 {
            let t = Token::new(&counts, &mut rng);
            let f = move || t.run();
            let id = match rng.gen_range(0..100) {
                0..=39 => note(&counts, h.post(f)),
                40..=59 => note(
                    &counts,
                    h.post_delayed(Duration::from_micros(rng.gen_range(0..10_000)), f),
                ),
                60..=74 => note(
                    &counts,
                    h.message(f)
                        .tag(Tag(rng.gen_range(0..8)))
                        .delay(Duration::from_micros(rng.gen_range(0..5_000)))
                        .post(),
                ),
                75..=79 => note(&counts, h.post_at_front(f)),
                _ => note(&counts, futures::executor::block_on(h.post_async(f))),
            };
            if let Some(id) = id {
                recent.push_back(id);
                if recent.len() > 64 {
                    recent.pop_front();
                }
            }
            if rng.gen_ratio(1, 8) {
                if let Some(id) = recent.pop_front() {
                    if id.cancel() {
                        counts.cancels.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn remover(h: Handle, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let mut rng = StdRng::seed_from_u64(99);
    while !stop.load(Ordering::Relaxed) {
        let n = if rng.gen_bool(0.5) {
            h.remove(Tag(rng.gen_range(0..8)))
        } else {
            let cut = rng.gen_range(0..8);
            h.remove_where(|m| m.tag().is_some_and(|t| t.0 == cut) && m.is_asynchronous())
                + h.remove_where(|m| m.tag() == Some(Tag(7)))
        };
        counts.removes.fetch_add(n as u64, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(rng.gen_range(1..5)));
    }
}

fn barriers(h: Handle, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let mut rng = StdRng::seed_from_u64(7);
    let asynchronous = h.asynchronous();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(token) = h.post_sync_barrier() {
            counts.barriers.fetch_add(1, Ordering::Relaxed);
            for _ in 0..4 {
                let t = Token::new(&counts, &mut rng);
                note(&counts, asynchronous.post(move || t.run()));
                let t = Token::new(&counts, &mut rng);
                note(&counts, h.post(move || t.run()));
            }
            thread::sleep(Duration::from_micros(rng.gen_range(0..500)));
            h.remove_sync_barrier(token)
                .expect("the barrier is ours and still up");
        }
        if h.run_sync(|| 1).is_ok() {
            counts.run_syncs.fetch_add(1, Ordering::Relaxed);
        }
        thread::sleep(Duration::from_millis(rng.gen_range(1..4)));
    }
}

/// Timers on the loop: an interval, sleeps reset and dropped, timeouts,
/// delayed tasks.
async fn timers(ticks: Rc<Cell<u64>>, h: Handle) {
    let mut rng = StdRng::seed_from_u64(3);
    let mut every = interval(Duration::from_millis(1));
    loop {
        every.tick().await;
        ticks.set(ticks.get() + 1);
        let mut s = sleep(Duration::from_millis(rng.gen_range(1..20)));
        if futures::poll!(&mut s).is_ready() {
            continue;
        }
        match rng.gen_range(0..4) {
            0 => drop(s),
            1 => {
                s.reset(Instant::now() + Duration::from_micros(rng.gen_range(0..800)));
                s.await;
            }
            2 => {
                let r = timeout(Duration::from_micros(300), sleep(Duration::from_secs(60))).await;
                assert!(r.is_err());
            }
            _ => {
                let d = Duration::from_micros(rng.gen_range(0..2_000));
                let t = h.spawn_after(d, async { 1u8 });
                if rng.gen_bool(0.5) {
                    drop(t);
                } else {
                    assert_eq!(t.await, 1);
                }
            }
        }
    }
}

fn message(c: u64, i: u64) -> Vec<u8> {
    let len = 1 + (c * 31 + i * 7) % 512;
    (0..len).map(|k| (c * 131 + i * 17 + k) as u8).collect()
}

async fn echo_server(l: TcpListener) {
    loop {
        let Ok((s, _)) = l.accept().await else {
            continue;
        };
        deliloop::spawn_local(async move {
            let mut buf = vec![0; 4096];
            loop {
                match (&s).read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if (&s).write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                }
            }
        })
        .detach();
    }
}

/// Opens a connection, echoes a few hundred messages, checks each byte,
/// closes; again and again.
async fn echo_client(
    addr: std::net::SocketAddr,
    c: u64,
    echoed: Rc<Cell<u64>>,
    conns: Rc<Cell<u64>>,
) {
    let mut round = 0u64;
    loop {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        for i in 0..300 {
            let m = message(c + round, i);
            s.write_all(&m).await.expect("write");
            let mut back = vec![0; m.len()];
            s.read_exact(&mut back).await.expect("read");
            assert_eq!(back, m, "echo of client {c} round {round} message {i}");
            echoed.set(echoed.get() + m.len() as u64);
        }
        drop(s);
        conns.set(conns.get() + 1);
        round += 1;
    }
}

/// Heap bytes in use (glibc's `mallinfo2`: small blocks and mmapped
/// ones), in KiB; printed next to the RSS to tell a leak from pages the
/// allocator keeps.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_kib() -> u64 {
    // SAFETY: no arguments; it only reads the allocator's statistics.
    let m = unsafe { libc::mallinfo2() };
    ((m.uordblks + m.hblkhd) / 1024) as u64
}

/// 0: only glibc has `mallinfo2`.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_kib() -> u64 {
    0
}

/// `VmRSS`, and of it `RssAnon` (heap, stacks) and `RssFile` (mapped
/// code and data), in KiB, from /proc/self/status.
fn rss_kib() -> (u64, u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(600);
    let run_for = Duration::from_secs(secs);
    let warmup = if secs >= 180 {
        Duration::from_secs(60)
    } else {
        run_for / 3
    };
    let looper = Looper::builder()
        .backlog_watermarks(768, 1_024)
        .build()
        .unwrap();
    let h = looper.handle();
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));

    let mut threads = Vec::new();
    for p in 0..3 {
        let (h, counts, stop) = (h.clone(), counts.clone(), stop.clone());
        threads.push(thread::spawn(move || producer(h, counts, stop, p)));
    }
    {
        let (h, counts, stop) = (h.clone(), counts.clone(), stop.clone());
        threads.push(thread::spawn(move || remover(h, counts, stop)));
    }
    {
        let (h, counts, stop) = (h.clone(), counts.clone(), stop.clone());
        threads.push(thread::spawn(move || barriers(h, counts, stop)));
    }

    let (ticks, echoed, conns) = (
        Rc::new(Cell::new(0)),
        Rc::new(Cell::new(0)),
        Rc::new(Cell::new(0)),
    );
    // These tasks loop forever: one that finishes has panicked.
    let mut tasks = vec![looper.spawn_local(timers(ticks.clone(), h.clone()))];
    let listener = looper.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    tasks.push(looper.spawn_local(echo_server(listener)));
    for c in 0..4 {
        tasks.push(looper.spawn_local(echo_client(addr, c * 1000, echoed.clone(), conns.clone())));
    }

    println!(
        "soak: {secs} s, warm-up {} s, watermarks 768/1024, 3 producers, a remover, a barrier thread, timers, 4 TCP echo clients",
        warmup.as_secs()
    );
    let start = Instant::now();
    let mut next_report = Duration::from_secs(10);
    let mut next_sample = Duration::ZERO;
    // Limbo moves fast (a walker preempted while it stands in the queue
    // pins a few hundred retired nodes for a moment): it is sampled every
    // millisecond, and a window's floor (its least sample) is what could
    // not be reclaimed; a leak would raise it.
    let (mut limbo_min, mut limbo_max) = (u64::MAX, 0);
    // (RSS, limbo floor) at the end of warm-up and at the end.
    let mut at_warmup: Option<(u64, u64)> = None;
    let mut at_end = (0, 0);
    loop {
        looper.turn(Some(Duration::from_millis(10)));
        let t = start.elapsed();
        if t >= next_sample {
            next_sample = t + Duration::from_millis(1);
            let limbo = looper.stats().limbo;
            limbo_min = limbo_min.min(limbo);
            limbo_max = limbo_max.max(limbo);
        }
        let last = t >= run_for;
        if t >= next_report || last {
            next_report += Duration::from_secs(10);
            let s = looper.stats();
            let (rss, anon, file) = rss_kib();
            println!(
                "t={:>4}s rss={:>6} KiB (anon {:>6}, file {:>6}) heap={:>6} KiB limbo={:>4} (10 s floor {:>4}, max {:>4}) backlog={:>4} posted={} run={} cancelled={} removed={} refused={} waited={} barriers={} ticks={} conns={} echoed={} MiB",
                t.as_secs(),
                rss,
                anon,
                file,
                heap_kib(),
                s.limbo,
                limbo_min,
                limbo_max,
                s.backlog,
                s.posted,
                s.messages_run,
                s.cancelled,
                s.removed,
                s.refused_full,
                s.waited,
                counts.barriers.load(Ordering::Relaxed),
                ticks.get(),
                conns.get(),
                echoed.get() >> 20,
            );
            if at_warmup.is_none() && t >= warmup {
                at_warmup = Some((rss, limbo_min));
            }
            at_end = (rss, limbo_min);
            (limbo_min, limbo_max) = (u64::MAX, 0);
        }
        if last {
            break;
        }
    }

    // Stop the threads (the loop keeps turning: a `post_async` may be
    // waiting for room), then quit: what is pending is dropped, counted.
    stop.store(true, Ordering::Relaxed);
    while threads.iter().any(|t| !t.is_finished()) {
        looper.turn(Some(Duration::from_millis(10)));
    }
    for t in threads {
        t.join().unwrap();
    }
    let ended = tasks.iter().filter(|t| t.is_finished()).count();
    h.quit();
    looper.run();
    let s = looper.stats();
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "end: limbo_peak={} posted={} run={} cancelled={} removed={} dropped={} refused={} backlog={} io_sources={} timers_fired={} tasks_cancelled={} barriers={} run_syncs={} conns={} echoed={} MiB",
        s.limbo_peak,
        s.posted,
        s.messages_run,
        s.cancelled,
        s.removed,
        s.messages_dropped,
        s.refused_full,
        s.backlog,
        s.io_sources,
        s.timers_fired,
        s.tasks_cancelled,
        c(&counts.barriers),
        c(&counts.run_syncs),
        conns.get(),
        echoed.get() >> 20,
    );

    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    let accounted = s.messages_run + s.cancelled + s.removed + s.messages_dropped;
    check(
        s.posted == accounted,
        format!(
            "posted {} != run + cancelled + removed + dropped {accounted}",
            s.posted
        ),
    );
    check(s.backlog == 0, format!("backlog {} after quit", s.backlog));
    check(
        s.posted == c(&counts.accepted),
        format!(
            "posted {} != accepted by the posters {}",
            s.posted,
            c(&counts.accepted)
        ),
    );
    check(
        s.messages_run == c(&counts.ran),
        format!(
            "run {} != payloads that ran {}",
            s.messages_run,
            c(&counts.ran)
        ),
    );
    check(
        s.cancelled == c(&counts.cancels),
        format!(
            "cancelled {} != successful cancels {}",
            s.cancelled,
            c(&counts.cancels)
        ),
    );
    check(
        s.removed == c(&counts.removes),
        format!(
            "removed {} != removals reported {}",
            s.removed,
            c(&counts.removes)
        ),
    );
    check(
        s.refused_full == c(&counts.refused),
        format!(
            "refused {} != Full errors seen {}",
            s.refused_full,
            c(&counts.refused)
        ),
    );
    let unrun = s.cancelled + s.removed + s.messages_dropped + c(&counts.handed_back);
    check(
        c(&counts.unrun) == unrun,
        format!(
            "payloads dropped unrun {} != cancelled + removed + dropped + handed back {unrun}",
            c(&counts.unrun)
        ),
    );
    check(
        s.io_sources == 0,
        format!("{} I/O sources left after quit", s.io_sources),
    );
    check(conns.get() > 0, "no TCP connection completed".into());
    check(
        ended == 0,
        format!("{ended} of the loop's tasks ended (a panic)"),
    );
    let (end_rss, end_limbo) = at_end;
    match at_warmup {
        None => check(false, "the run ended before warm-up did".into()),
        Some((rss, limbo)) => {
            check(
                end_rss * 100 <= rss * 105,
                format!("RSS grew from {rss} KiB at warm-up to {end_rss} KiB (> 5%)"),
            );
            check(
                end_limbo * 100 <= limbo * 105,
                format!("the limbo floor grew from {limbo} at warm-up to {end_limbo} (> 5%)"),
            );
            println!(
                "soak: RSS {rss} -> {end_rss} KiB ({:+.1}%), limbo floor {limbo} -> {end_limbo}, from the end of warm-up to the end",
                (end_rss as f64 / rss as f64 - 1.0) * 100.0
            );
        }
    }
    if failures.is_empty() {
        println!("soak: PASS");
    } else {
        for f in &failures {
            println!("soak: FAIL: {f}");
        }
        std::process::exit(1);
    }
}
