//! `deliloop::signal`: what a stream sees of the deliveries of its
//! signals, on one loop and on several, and what it refuses.
//!
//! Signals are process-wide and libtest runs these tests on parallel
//! threads, so each test raises a signal of its own and counts only that
//! one. `raise` runs the handler on the raising thread before it returns,
//! so a delivery made with it is complete (bit set, byte written) when it
//! returns.
// Signals are Unix only (README, "Platforms").
#![cfg(unix)]

use std::io::ErrorKind;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use deliloop::signal::{ctrl_c, Signals};
use deliloop::time::timeout;
use deliloop::Looper;
use futures::{FutureExt, StreamExt};

/// The bound on waiting for a delivery: generous, a failure bound only.
const WAIT: Duration = Duration::from_secs(10);

/// A real-time signal of this test binary's own (none of them has a
/// meaning for the test harness).
fn rt(k: i32) -> i32 {
    libc::SIGRTMIN() + k
}

fn raise(sig: i32) {
    // SAFETY: every signal raised here is caught by a stream made before.
    assert_eq!(unsafe { libc::raise(sig) }, 0);
}

/// The next item, or a failure after [`WAIT`].
async fn next(signals: &mut Signals) -> i32 {
    timeout(WAIT, signals.next())
        .await
        .expect("no signal within the bound")
        .expect("the stream ended")
}

/// No item is ready now.
fn nothing_more(signals: &mut Signals) {
    assert_eq!(signals.next().now_or_never(), None, "an item too many");
}

#[test]
fn two_loopers_on_two_threads_both_see_one_signal() {
    let sig = libc::SIGUSR1;
    let (ready_tx, ready_rx) = mpsc::channel();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let ready = ready_tx.clone();
            thread::spawn(move || {
                let looper = Looper::new().unwrap();
                let mut signals = Signals::new([sig]).unwrap();
                ready.send(()).unwrap();
                looper.block_on(async {
                    let got = next(&mut signals).await;
                    nothing_more(&mut signals);
                    got
                })
            })
        })
        .collect();
    ready_rx.recv().unwrap();
    ready_rx.recv().unwrap();
    // To the process: the kernel picks the thread that runs the handler.
    // SAFETY: both threads catch `sig` from before they said ready.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig) }, 0);
    for t in threads {
        assert_eq!(t.join().unwrap(), sig);
    }
}

#[test]
fn several_streams_on_one_loop_each_see_each_delivery_once() {
    let sig = libc::SIGUSR2;
    Looper::new().unwrap().block_on(async {
        let mut streams: Vec<Signals> = (0..3).map(|_| Signals::new([sig]).unwrap()).collect();
        for _ in 0..2 {
            raise(sig);
            for s in &mut streams {
                assert_eq!(next(s).await, sig);
                nothing_more(s);
            }
        }
    });
}

#[test]
fn a_delivery_before_the_first_poll_is_seen() {
    let sig = rt(0);
    // Made off any loop, polled first on a loop made afterwards.
    let mut signals = Signals::new([sig]).unwrap();
    raise(sig);
    let looper = Looper::new().unwrap();
    looper.block_on(async {
        assert_eq!(next(&mut signals).await, sig);
        nothing_more(&mut signals);
    });
}

#[test]
fn a_burst_yields_between_one_and_n_items_and_the_last_is_never_lost() {
    let sig = rt(1);
    let n = 1_000;
    Looper::new().unwrap().block_on(async {
        let mut signals = Signals::new([sig]).unwrap();
        let (done_tx, done_rx) = futures::channel::oneshot::channel();
        // The burst comes from another thread while this loop looks.
        let raiser = thread::spawn(move || {
            for _ in 0..n {
                raise(sig);
            }
            done_tx.send(()).unwrap();
        });
        let mut items = 0;
        let mut done = done_rx.fuse();
        loop {
            futures::select! {
                got = signals.next().fuse() => {
                    assert_eq!(got, Some(sig));
                    items += 1;
                }
                r = done => {
                    r.unwrap();
                    break;
                }
            }
        }
        raiser.join().unwrap();
        // Every raise returned before `done` was sent, so each delivery's
        // bit is set or taken by now.
        while let Some(got) = signals.next().now_or_never() {
            assert_eq!(got, Some(sig));
            items += 1;
        }
        assert!((1..=n).contains(&items), "{items} items for {n} deliveries");
        // One more delivery after the burst is always seen, exactly once.
        raise(sig);
        assert_eq!(next(&mut signals).await, sig);
        nothing_more(&mut signals);
    });
}

#[test]
fn a_stream_of_two_signals_yields_each() {
    let (a, b) = (rt(2), rt(3));
    Looper::new().unwrap().block_on(async {
        let mut signals = Signals::new([a, b, a]).unwrap();
        raise(b);
        raise(a);
        let mut got = [next(&mut signals).await, next(&mut signals).await];
        got.sort_unstable();
        assert_eq!(got, [a, b]);
        nothing_more(&mut signals);
    });
}

#[test]
fn dropping_a_stream_leaves_the_others_and_a_new_one_sees_only_later_deliveries() {
    let sig = rt(4);
    Looper::new().unwrap().block_on(async {
        let first = Signals::new([sig]).unwrap();
        let mut second = Signals::new([sig]).unwrap();
        raise(sig);
        drop(first);
        assert_eq!(next(&mut second).await, sig);
        nothing_more(&mut second);

        // Made after the delivery above: it sees the next one only.
        let mut third = Signals::new([sig]).unwrap();
        nothing_more(&mut third);
        raise(sig);
        assert_eq!(next(&mut third).await, sig);
        assert_eq!(next(&mut second).await, sig);
        nothing_more(&mut third);
        nothing_more(&mut second);
    });
}

#[test]
fn a_stream_works_in_a_spawned_task() {
    let sig = rt(5);
    let looper = Looper::new().unwrap();
    let got = looper.block_on(async {
        let mut signals = Signals::new([sig]).unwrap();
        let task = deliloop::spawn(async move { next(&mut signals).await });
        raise(sig);
        task.await
    });
    assert_eq!(got, sig);
}

#[test]
fn forbidden_and_unknown_signals_are_invalid_input() {
    let forbidden = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
    ];
    let unknown = [0, -1, 65, libc::SIGRTMAX() + 1];
    for sig in forbidden.into_iter().chain(unknown) {
        let err = Signals::new([sig]).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "signal {sig}: {err}");
    }
    // One bad signal refuses the whole set.
    let err = Signals::new([libc::SIGUSR1, libc::SIGKILL]).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn ctrl_c_completes_on_a_sigint_raised_after_it_was_made() {
    Looper::new().unwrap().block_on(async {
        // Made first: from here on SIGINT no longer ends the process.
        let interrupted = ctrl_c();
        let raiser = thread::spawn(|| {
            // SAFETY: SIGINT is caught by `interrupted`, made above.
            assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGINT) }, 0);
        });
        timeout(WAIT, interrupted)
            .await
            .expect("no SIGINT within the bound")
            .unwrap();
        raiser.join().unwrap();

        // A second one sees the next SIGINT only, even raised before its
        // first poll.
        let again = ctrl_c();
        raise(libc::SIGINT);
        timeout(WAIT, again).await.unwrap().unwrap();
    });
}

#[test]
fn streams_and_ctrl_c_are_send_and_unpin() {
    fn check<T: Send + Unpin>() {}
    check::<Signals>();
    check::<deliloop::signal::CtrlC>();
}
