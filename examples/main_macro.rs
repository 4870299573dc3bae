//! `#[deliloop::main]`: `async fn main` on a Looper on the main thread.
//!
//! `cargo run --example main_macro [-- --panic]`
//!
//! Prints `answer 42` from a spawned task. With `--panic` the body panics
//! afterwards while a task still sleeps on the loop: the process prints the
//! panic and exits with status 101, as a panicking plain `main` does
//! (`tests/macros.rs` checks both runs).

use std::time::Duration;

#[deliloop::main]
async fn main() {
    // Still pending when the body ends: the Looper cancels it as it drops,
    // during the unwind when the body panics.
    deliloop::spawn(deliloop::time::sleep(Duration::from_secs(60))).detach();
    let answer = deliloop::spawn(async { 6 * 7 }).await;
    println!("answer {answer}");
    if std::env::args().any(|a| a == "--panic") {
        panic!("main_macro: asked to panic");
    }
}
