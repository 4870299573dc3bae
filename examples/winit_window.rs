//! A winit window whose counter a [`Looper`] drives, embedded the
//! wake-hook way (module `deliloop::embed`, pattern 2).
//!
//! ```sh
//! cargo run --release --features winit-example --example winit_window        # until closed
//! cargo run --release --features winit-example --example winit_window -- 5   # 5 seconds
//! ```
//!
//! (or `WINIT_WINDOW_SECONDS=5`). The window shows two counters drawn into
//! its contents with softbuffer: `TICKS`, advanced by a task on the loop
//! thread that waits for a deliloop interval of 100 ms, and `POSTS`,
//! advanced by closures that a background thread posts every 200 ms.
//!
//! How it sleeps: winit owns the thread. The looper's wake hook sends winit
//! a user event (`EventLoopProxy::send_event`) when a post arrives for an
//! idle looper; `about_to_wait` calls [`Looper::dispatch_ready`] and asks
//! winit to sleep until the returned [`Turn`]'s `next_deadline`
//! (`ControlFlow::WaitUntil`), or without a deadline (`ControlFlow::Wait`).
//! Never `ControlFlow::Poll`: between a tick, a post and a redraw the
//! process sleeps. On exit it prints what arrived and the CPU it used after
//! a one-second warm-up; `scripts/winit-xvfb.sh` runs it under Xvfb and
//! checks those lines.
//!
//! Only winit's X11 backend is built (Cargo.toml, feature `winit-example`);
//! under Wayland it needs XWayland.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use deliloop::time::interval_at;
use deliloop::{Handle, Looper, Turn};
use winit::application::ApplicationHandler;
use winit::dpi::LogicalSize;
use winit::event::{StartCause, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop, EventLoopProxy};
use winit::window::{Window, WindowId};

/// The tick task's period.
const TICK: Duration = Duration::from_millis(100);
/// How often the background thread posts.
const POST_EVERY: Duration = Duration::from_millis(200);
/// CPU use is measured from this long after start to exit.
const WARM_UP: Duration = Duration::from_secs(1);
/// The window's background (0x00RRGGBB); the script looks for it in its
/// screenshot.
const BACKGROUND: u32 = 0x00_1e_3a_5f;
const INK: u32 = 0x00_ff_ff_ff;

/// The wake hook's user event: "the looper has work".
struct Wake;

/// What the loop thread counts; posts update it too, so it is `Sync`.
#[derive(Default)]
struct Counts {
    ticks: AtomicU64,
    posts: AtomicU64,
    hook_calls: AtomicU64,
    /// Lateness of each tick after its scheduled time, in µs.
    tick_late_us: Mutex<Vec<u64>>,
    /// Time from each post to its run on the loop thread, in µs.
    post_delay_us: Mutex<Vec<u64>>,
}

/// The window and what draws into it, once winit has resumed.
struct Shown {
    window: Arc<Window>,
    surface: softbuffer::Surface<Arc<Window>, Arc<Window>>,
}

struct App {
    looper: Looper,
    counts: Arc<Counts>,
    shown: Option<Shown>,
    /// winit loop iterations (`new_events` calls) after the warm-up.
    wakeups: u64,
    /// Process CPU time and wall time when the warm-up ended.
    measure_from: Option<(Duration, Instant)>,
    started: Instant,
    report: Option<Report>,
}

/// What the app measured, printed after winit's loop returns.
struct Report {
    cpu: Duration,
    wall: Duration,
    wakeups: u64,
}

fn main() {
    let seconds = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("WINIT_WINDOW_SECONDS").ok())
        .map(|s| s.parse::<f64>().expect("seconds: a number, e.g. 5"));
    let event_loop = EventLoop::<Wake>::with_user_event()
        .build()
        .expect("a winit event loop (is DISPLAY set?)");
    let counts = Arc::new(Counts::default());
    let looper = wake_hooked_looper(event_loop.create_proxy(), counts.clone());
    let handle = looper.handle();
    if let Some(s) = seconds {
        let h = handle.clone();
        handle
            .post_delayed(Duration::from_secs_f64(s), move || h.quit())
            .unwrap();
    }
    spawn_ticks(&looper, counts.clone());
    let poster = spawn_poster(handle.clone(), counts.clone());

    let mut app = App {
        looper,
        counts: counts.clone(),
        shown: None,
        wakeups: 0,
        measure_from: None,
        started: Instant::now(),
        report: None,
    };
    event_loop.run_app(&mut app).expect("winit's event loop");
    handle.quit();
    let sent = poster.join().unwrap();
    print_report(&app, sent);
}

/// A looper whose wake hook sends winit a [`Wake`] event.
fn wake_hooked_looper(proxy: EventLoopProxy<Wake>, counts: Arc<Counts>) -> Looper {
    // winit's proxy is `Send` but not `Sync` on every backend; the hook
    // must be both, and runs at most once per idle period, so a mutex is
    // uncontended.
    let proxy = Mutex::new(proxy);
    Looper::builder()
        .wake_hook(move || {
            counts.hook_calls.fetch_add(1, Ordering::Relaxed);
            // Fails only once winit's loop has exited: nothing to wake.
            let _ = proxy.lock().unwrap().send_event(Wake);
        })
        .build()
        .expect("a looper")
}

/// The delayed task: every 100 ms on the loop thread, counts a tick and
/// records how late it ran.
fn spawn_ticks(looper: &Looper, counts: Arc<Counts>) {
    looper
        .spawn_local(async move {
            let mut every = interval_at(Instant::now() + TICK, TICK);
            loop {
                let due = every.tick().await;
                let late = due.elapsed().as_micros() as u64;
                counts.tick_late_us.lock().unwrap().push(late);
                counts.ticks.fetch_add(1, Ordering::Relaxed);
            }
        })
        .detach();
}

/// A background thread that posts a counted closure every 200 ms until the
/// looper quits; returns how many it posted.
fn spawn_poster(handle: Handle, counts: Arc<Counts>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut sent = 0;
        loop {
            thread::sleep(POST_EVERY);
            let c = counts.clone();
            let at = Instant::now();
            let posted = handle.post(move || {
                c.post_delay_us
                    .lock()
                    .unwrap()
                    .push(at.elapsed().as_micros() as u64);
                c.posts.fetch_add(1, Ordering::Relaxed);
            });
            if posted.is_err() {
                return sent; // the looper quit
            }
            sent += 1;
        }
    })
}

impl ApplicationHandler<Wake> for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.shown.is_some() {
            return;
        }
        let attrs = Window::default_attributes()
            .with_title("deliloop in winit")
            .with_inner_size(LogicalSize::new(360.0, 140.0));
        let window = Arc::new(event_loop.create_window(attrs).expect("a window"));
        let context = softbuffer::Context::new(window.clone()).expect("a softbuffer context");
        let surface = softbuffer::Surface::new(&context, window.clone()).expect("a surface");
        self.shown = Some(Shown { window, surface });
    }

    fn new_events(&mut self, _: &ActiveEventLoop, cause: StartCause) {
        if self.measure_from.is_none() && self.started.elapsed() >= WARM_UP {
            self.measure_from = Some((process_cpu(), Instant::now()));
        }
        if self.measure_from.is_some() && !matches!(cause, StartCause::Init) {
            self.wakeups += 1;
        }
    }

    // The wake hook's event only ends winit's wait; `about_to_wait`, which
    // follows every batch of events, does the dispatching.
    fn user_event(&mut self, _: &ActiveEventLoop, _: Wake) {}

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::RedrawRequested => self.draw(),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        let turn: Turn = self.looper.dispatch_ready();
        if turn.quit {
            self.finish();
            event_loop.exit();
            return;
        }
        if turn.dispatched > 0 {
            if let Some(shown) = &self.shown {
                shown.window.request_redraw();
            }
        }
        event_loop.set_control_flow(match turn.next_deadline {
            Some(deadline) => ControlFlow::WaitUntil(deadline),
            None => ControlFlow::Wait,
        });
    }

    fn exiting(&mut self, _: &ActiveEventLoop) {
        self.finish();
    }
}

impl App {
    /// Records the CPU and wall time since the warm-up, once.
    fn finish(&mut self) {
        if self.report.is_some() {
            return;
        }
        let (cpu0, t0) = self.measure_from.unwrap_or((Duration::ZERO, self.started));
        self.report = Some(Report {
            cpu: process_cpu().saturating_sub(cpu0),
            wall: t0.elapsed(),
            wakeups: self.wakeups,
        });
    }

    /// Fills the window and writes both counters into it.
    fn draw(&mut self) {
        let Some(shown) = &mut self.shown else {
            return;
        };
        let size = shown.window.inner_size();
        let (Some(w), Some(h)) = (NonZeroU32::new(size.width), NonZeroU32::new(size.height)) else {
            return;
        };
        shown.surface.resize(w, h).expect("resize the surface");
        let mut buffer = shown.surface.buffer_mut().expect("a buffer");
        let mut canvas = Canvas {
            pixels: &mut buffer,
            width: w.get() as usize,
        };
        canvas.pixels.fill(BACKGROUND);
        let ticks = self.counts.ticks.load(Ordering::Relaxed);
        let posts = self.counts.posts.load(Ordering::Relaxed);
        let scale = (w.get() as usize / 80).clamp(1, 5);
        canvas.text(&format!("TICKS {ticks}"), 16, 16, scale);
        canvas.text(&format!("POSTS {posts}"), 16, 16 + 10 * scale, scale);
        buffer.present().expect("present the buffer");
    }
}

/// This process's user + system CPU time so far.
fn process_cpu() -> Duration {
    // SAFETY: a zeroed rusage is valid; getrusage only writes into it.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// p50 and max of a set of samples.
fn p50_max(samples: &Mutex<Vec<u64>>) -> (u64, u64) {
    let mut v = samples.lock().unwrap().clone();
    v.sort_unstable();
    (
        v.get(v.len() / 2).copied().unwrap_or(0),
        v.last().copied().unwrap_or(0),
    )
}

/// The lines `scripts/winit-xvfb.sh` reads.
fn print_report(app: &App, sent: u64) {
    let c = &app.counts;
    let (tick_p50, tick_max) = p50_max(&c.tick_late_us);
    let (post_p50, post_max) = p50_max(&c.post_delay_us);
    println!(
        "ticks: {} (lateness after the deadline: p50 {tick_p50} us, max {tick_max} us)",
        c.ticks.load(Ordering::Relaxed)
    );
    println!(
        "posts: {} of {sent} sent from another thread (post to run: p50 {post_p50} us, max {post_max} us)",
        c.posts.load(Ordering::Relaxed)
    );
    println!("wake hook calls: {}", c.hook_calls.load(Ordering::Relaxed));
    if let Some(r) = &app.report {
        let secs = r.wall.as_secs_f64().max(1e-9);
        println!(
            "idle cpu: {:.2}% of one core over {secs:.2} s ({} winit wake-ups, {:.1}/s)",
            r.cpu.as_secs_f64() / secs * 100.0,
            r.wakeups,
            r.wakeups as f64 / secs
        );
    }
}

/// A pixel buffer to write text into.
struct Canvas<'a> {
    pixels: &'a mut [u32],
    width: usize,
}

impl Canvas<'_> {
    /// Writes `text` (digits, space and the letters of TICKS and POSTS) at
    /// (`x`, `y`), each font pixel `scale` pixels square.
    fn text(&mut self, text: &str, x: usize, y: usize, scale: usize) {
        let height = self.pixels.len() / self.width;
        for (i, ch) in text.chars().enumerate() {
            let x0 = x + i * 6 * scale;
            for (row, bits) in glyph(ch).iter().enumerate() {
                for col in 0..5 {
                    if bits & (0b10000 >> col) == 0 {
                        continue;
                    }
                    for dy in 0..scale {
                        for dx in 0..scale {
                            let (px, py) = (x0 + col * scale + dx, y + row * scale + dy);
                            if px < self.width && py < height {
                                self.pixels[py * self.width + px] = INK;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A 5x7 glyph, one row a byte (the low five bits, leftmost first).
fn glyph(ch: char) -> [u8; 7] {
    match ch {
        '0' => [0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e],
        '1' => [0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e],
        '2' => [0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f],
        '3' => [0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e],
        '4' => [0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02],
        '5' => [0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e],
        '6' => [0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e],
        '7' => [0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e],
        '9' => [0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c],
        'T' => [0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'I' => [0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e],
        'C' => [0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'S' => [0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e],
        'P' => [0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10],
        'O' => [0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e],
        _ => [0; 7],
    }
}
