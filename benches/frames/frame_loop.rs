//! The frame loop: at every vsync of a 120 Hz clock, run posted results
//! until the frame's dispatch budget is spent, then render for a fixed
//! cost. A vsync at which no new frame is ready (the frame before it ended
//! late) is a missed frame, as Android's "missed vsync" counts them.

use std::time::{Duration, Instant};

/// 120 Hz.
pub const PERIOD: Duration = Duration::from_nanos(1_000_000_000 / 120);
/// The fixed cost of rendering a frame: this much of the loop thread's CPU
/// time, spun.
pub const RENDER: Duration = Duration::from_millis(3);
/// Headroom between the end of the dispatch budget plus the render and
/// the deadline (for the wake-up at vsync and the render's own noise).
pub const SLACK: Duration = Duration::from_millis(1);

/// A run's vsync clock: `vsyncs` periods from `origin`.
#[derive(Clone, Copy)]
pub struct Clock {
    pub origin: Instant,
    pub vsyncs: u32,
}

impl Clock {
    /// A clock whose first vsync is one period from now.
    pub fn new(vsyncs: u32) -> Clock {
        Clock {
            origin: Instant::now() + PERIOD,
            vsyncs,
        }
    }

    /// The time of vsync `v`.
    pub fn at(&self, v: u32) -> Instant {
        self.origin + PERIOD * v
    }

    /// The last vsync: the run's end.
    pub fn end(&self) -> Instant {
        self.at(self.vsyncs)
    }
}

/// What a run of the frame loop saw.
pub struct Frames {
    /// Each frame's time from its vsync to the end of its render, in ns.
    pub times_ns: Vec<f64>,
    /// Vsyncs (of `Clock::vsyncs`) at which no new frame was ready.
    pub missed: u32,
    /// Frames that ended after their deadline, the next vsync (each costs
    /// one missed vsync or more).
    pub late: usize,
    /// Late frames in which the loop thread was off the CPU and not
    /// runnable for more than [`SLACK`]: blocked (on a lock, say).
    pub late_blocked: usize,
    /// Late frames in which it waited that long to run while runnable, or
    /// its virtual CPU was stolen by the hypervisor: preempted by another
    /// process (nothing of this bench's runs on the loop's CPU). The rest
    /// of the late frames ran that long on the CPU (spinning, say).
    pub late_preempted: usize,
    /// The share of the loop's CPU that other processes (or the
    /// hypervisor) took during the run: the source of "preempted" frames.
    pub foreign_cpu: f64,
    /// The longest overrun of a dispatch budget, in ns.
    pub worst_dispatch_overrun_ns: f64,
    /// The five longest late frames, longest first, each split into where
    /// its time went.
    pub worst: Vec<LateFrame>,
}

/// Where a late frame's time went, from its vsync to the end of its
/// render.
#[derive(Clone, Copy)]
pub struct LateFrame {
    pub took: Duration,
    /// The dispatch budget's overrun.
    pub overrun: Duration,
    /// On the CPU.
    pub cpu: Duration,
    /// Runnable but waiting for the CPU, or stolen by the hypervisor.
    pub waiting: Duration,
    /// Neither: blocked.
    pub blocked: Duration,
}

/// Runs frames until the clock's last vsync; `dispatch(until)` runs posted
/// work until `until` (or nothing is due).
pub fn run(clock: Clock, cpu: usize, mut dispatch: impl FnMut(Instant)) -> Frames {
    let (busy0, (own0, _), t0) = (cpu_times(cpu).0, schedstat(), Instant::now());
    let mut times_ns = Vec::with_capacity(clock.vsyncs as usize);
    let mut missed = 0;
    let mut late = 0;
    let mut late_blocked = 0;
    let mut late_preempted = 0;
    let mut worst_dispatch_overrun_ns: f64 = 0.0;
    let mut worst: Vec<LateFrame> = Vec::new();
    let mut vsync = 0u32;
    while vsync < clock.vsyncs {
        let start = clock.at(vsync);
        let ((cpu0, delay0), steal0) = (schedstat(), cpu_times(cpu).1);
        let now = Instant::now();
        if start > now {
            std::thread::sleep(start - now);
        }
        let budget_end = start + PERIOD - RENDER - SLACK;
        dispatch(budget_end);
        let overrun = Instant::now().saturating_duration_since(budget_end);
        worst_dispatch_overrun_ns = worst_dispatch_overrun_ns.max(overrun.as_nanos() as f64);
        render();
        let end = Instant::now();
        let took = end - start;
        times_ns.push(took.as_nanos() as f64);
        if took > PERIOD {
            late += 1;
            let ((cpu1, delay1), steal1) = (schedstat(), cpu_times(cpu).1);
            // Waiting for the CPU: on its run queue, or with the virtual
            // CPU itself descheduled by the hypervisor (steal).
            let delay = delay1 - delay0 + steal1.saturating_sub(steal0);
            let cpu = cpu1 - cpu0;
            let blocked = took.saturating_sub(cpu + delay);
            if blocked > SLACK {
                late_blocked += 1;
            } else if delay > SLACK {
                late_preempted += 1;
            }
            worst.push(LateFrame {
                took,
                overrun,
                cpu,
                waiting: delay,
                blocked,
            });
            worst.sort_by_key(|f| std::cmp::Reverse(f.took));
            worst.truncate(5);
        }
        // Like Android's Choreographer: the next frame starts at the first
        // vsync after this one ended; the vsyncs in between showed no new
        // frame.
        let next = ((end - clock.origin).as_nanos() / PERIOD.as_nanos()) as u32 + 1;
        missed += next.min(clock.vsyncs + 1) - vsync - 1;
        vsync = next;
    }
    let (busy, own) = (cpu_times(cpu).0 - busy0, schedstat().0 - own0);
    let foreign_cpu = busy.saturating_sub(own).as_secs_f64() / t0.elapsed().as_secs_f64();
    Frames {
        foreign_cpu,
        times_ns,
        missed,
        late,
        late_blocked,
        late_preempted,
        worst_dispatch_overrun_ns,
        worst,
    }
}

/// Time CPU `cpu` has spent busy (user, nice, system, interrupts, steal)
/// and, of that, stolen by the hypervisor, from `/proc/stat`.
fn cpu_times(cpu: usize) -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = format!("cpu{cpu}");
    let Some(line) = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&name))
    else {
        return (Duration::ZERO, Duration::ZERO);
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    // SAFETY: plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let steal = f.get(7).copied().unwrap_or(0);
    let d = |t: u64| Duration::from_nanos(t * 1_000_000_000 / hz);
    (d(ticks), d(steal))
}

/// This thread's CPU time and time spent runnable but waiting for a CPU,
/// from the scheduler (`/proc/thread-self/schedstat`; zero without it).
fn schedstat() -> (Duration, Duration) {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
    let cpu = f.next().unwrap_or(0);
    let delay = f.next().unwrap_or(0);
    (Duration::from_nanos(cpu), Duration::from_nanos(delay))
}

/// Spins for [`RENDER`] of this thread's CPU time: the frame's own work.
fn render() {
    let start = thread_cpu();
    while thread_cpu() - start < RENDER {
        std::hint::spin_loop();
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
