//! The smallest deliloop program.
//!
//! `cargo run --example hello`

use std::time::Duration;

fn main() {
    deliloop::block_on(async {
        let greeter = deliloop::spawn(async { "hello" });
        deliloop::time::sleep(Duration::from_millis(10)).await;
        println!("{}, world", greeter.await);
    });
}
