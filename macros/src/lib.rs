//! `#[deliloop::main]` and `#[deliloop::test]`: the entry-point attributes
//! of [deliloop](https://docs.rs/deliloop). Use them through `deliloop`,
//! which re-exports them under its default feature `macros`; the code they
//! generate names only `::deliloop` paths.
//!
//! ```
//! #[deliloop::main]
//! async fn main() {
//!     let answer = deliloop::spawn(async { 6 * 7 }).await;
//!     assert_eq!(answer, 42);
//! }
//! ```
//!
//! Both take the same options, each `name = literal`, separated by commas:
//!
//! | option | value | sets |
//! |---|---|---|
//! | `start_paused` | `true` or `false` | `Builder::start_paused`: the loop's clock starts paused |
//! | `budget` | an integer, at least 1 | `Builder::budget`: entries dispatched per turn at most |
//!
//! Anything else is a compile error that names the option.
#![warn(missing_docs)]

use proc_macro::TokenStream;

mod expand;

use expand::Kind;

/// Runs `async fn main` on a `deliloop::Looper` built on the calling (main)
/// thread: the body is the `block_on` future, so tasks it spawns, its
/// timers and its I/O run on that thread. The return type is kept, so
/// `main` may return a `Result` as a plain `main` does.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// #[deliloop::main]
/// async fn main() -> std::io::Result<()> {
///     let start = Instant::now();
///     let ticks = deliloop::spawn(async {
///         deliloop::time::sleep(Duration::from_millis(2)).await;
///         "tick"
///     });
///     assert_eq!(ticks.await, "tick");
///     assert!(start.elapsed() >= Duration::from_millis(2));
///     Ok(())
/// }
/// ```
///
/// With options (see the crate docs for the list):
///
/// ```
/// #[deliloop::main(budget = 64, start_paused = false)]
/// async fn main() {
///     deliloop::yield_now().await;
/// }
/// ```
///
/// # Panics
///
/// A panic in the body unwinds out of `main`, so the process prints the
/// panic and exits with status 101, as a panicking plain `main` does. If
/// the looper cannot be created (no file descriptors left), `main` panics
/// with a message that says so.
///
/// # Misuse
///
/// The function must be `async`:
///
/// ```compile_fail
/// #[deliloop::main]
/// fn main() {}
/// ```
///
/// and options are only the ones listed in the crate docs:
///
/// ```compile_fail
/// #[deliloop::main(threads = 4)]
/// async fn main() {}
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Kind::Main, args.into(), item.into()).into()
}

/// Makes `async fn name()` a plain `#[test] fn name()` that builds a fresh
/// `deliloop::Looper` and `block_on`s the body, so no state of one test's
/// loop reaches another. The generated function keeps the name, the
/// visibility, the return type and the other attributes (`#[ignore]`,
/// `#[should_panic]`), and other code may call it directly.
///
/// ```
/// #[deliloop::test]
/// async fn spawned_task_answers() {
///     assert_eq!(deliloop::spawn(async { 1 + 1 }).await, 2);
/// }
///
/// // Under a paused clock a one-hour sleep returns at once (the loop
/// // jumps its clock to the deadline when nothing else is ready).
/// #[deliloop::test(start_paused = true)]
/// async fn an_hour_in_no_time() {
///     deliloop::time::sleep(std::time::Duration::from_secs(3600)).await;
/// }
/// ```
///
/// # Misuse
///
/// Each is a compile error that says what is wrong. A function that is not
/// `async`:
///
/// ```compile_fail
/// #[deliloop::test]
/// fn not_async() {}
/// ```
///
/// arguments (the harness passes none):
///
/// ```compile_fail
/// #[deliloop::test]
/// async fn with_argument(n: u32) {}
/// ```
///
/// an unknown option:
///
/// ```compile_fail
/// #[deliloop::test(flavor = "multi_thread")]
/// async fn unknown_option() {}
/// ```
///
/// an option's value of the wrong type:
///
/// ```compile_fail
/// #[deliloop::test(start_paused = 1)]
/// async fn bad_value() {}
/// ```
///
/// and a second `#[test]`:
///
/// ```compile_fail
/// #[deliloop::test]
/// #[test]
/// async fn twice() {}
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Kind::Test, args.into(), item.into()).into()
}
