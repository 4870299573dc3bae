//! The smallest deliloop program.
//!
//! `cargo run --example hello`

use std::time::Duration;

#[deliloop::main]
async fn main() {
    let greeter = deliloop::spawn(async { "hello" });
    deliloop::time::sleep(Duration::from_millis(10)).await;
    println!("{}, world", greeter.await);
}
