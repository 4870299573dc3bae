//! The expansion's output and its error messages, as strings: the
//! `compile_fail` doctests in `lib.rs` prove that each misuse fails to
//! compile; these prove that it fails with the message that names it.

use proc_macro2::TokenStream;

use super::{expand, Kind};

fn run(kind: Kind, args: &str, item: &str) -> String {
    let args: TokenStream = args.parse().expect("args tokenize");
    let item: TokenStream = item.parse().expect("item tokenizes");
    // Token streams print with spaces between tokens; drop them so the
    // assertions read like source.
    expand(kind, args, item).to_string().replace(' ', "")
}

/// The message of the `compile_error!` an expansion produced.
fn error(kind: Kind, args: &str, item: &str) -> String {
    let out = run(kind, args, item);
    assert!(out.contains("compile_error!"), "no error in {out}");
    out
}

#[test]
fn test_is_a_plain_test_fn_of_the_same_name() {
    let out = run(Kind::Test, "", "async fn adds() { assert_eq!(1 + 1, 2); }");
    assert!(
        out.starts_with("#[::core::prelude::v1::test]fnadds()"),
        "{out}"
    );
    assert!(out.contains("asyncfnadds(){assert_eq!(1+1,2);}"), "{out}");
    assert!(
        out.contains("::deliloop::Looper::builder().build()"),
        "{out}"
    );
    assert!(out.contains(".block_on(adds())"), "{out}");
}

#[test]
fn start_paused_calls_the_builder_method() {
    let out = run(Kind::Test, "start_paused = true", "async fn paused() {}");
    assert!(
        out.contains("::deliloop::Looper::builder().start_paused(true).build()"),
        "{out}"
    );
}

#[test]
fn main_keeps_return_type_attributes_and_options() {
    let out = run(
        Kind::Main,
        "budget = 64, start_paused = false",
        "#[allow(unused)] async fn main() -> std::io::Result<()> { Ok(()) }",
    );
    assert!(
        out.starts_with("#[allow(unused)]fnmain()->std::io::Result<()>{"),
        "{out}"
    );
    assert!(
        out.contains("asyncfnmain()->std::io::Result<()>{Ok(())}"),
        "{out}"
    );
    assert!(
        out.contains("builder().start_paused(false).budget(64usize).build()"),
        "{out}"
    );
    assert!(!out.contains("test"), "main is no test: {out}");
}

#[test]
fn other_attributes_and_visibility_are_kept() {
    let out = run(
        Kind::Test,
        "",
        "#[should_panic(expected = \"boom\")] pub async fn boom() { panic!(\"boom\") }",
    );
    assert!(
        out.starts_with(
            "#[::core::prelude::v1::test]#[should_panic(expected=\"boom\")]pubfnboom()"
        ),
        "{out}"
    );
}

#[test]
fn non_async_fn_is_named() {
    let out = error(Kind::Test, "", "fn plain() {}");
    assert!(
        out.contains("needsan`asyncfn`:write`asyncfnplain`"),
        "{out}"
    );
    let out = error(Kind::Main, "", "fn main() {}");
    assert!(out.contains("#[deliloop::main]needsan`asyncfn`"), "{out}");
}

#[test]
fn arguments_are_named() {
    let out = error(Kind::Test, "", "async fn with_arg(n: u32) {}");
    assert!(
        out.contains("`with_arg`musttakenoarguments(thetestharnesscallsitwithnone)"),
        "{out}"
    );
}

#[test]
fn unknown_option_is_named() {
    let out = error(Kind::Test, "flavor = \"multi_thread\"", "async fn t() {}");
    assert!(out.contains("unknownoption`flavor`"), "{out}");
    let out = error(Kind::Main, "worker_threads = 2", "async fn main() {}");
    assert!(
        out.contains("#[deliloop::main]:unknownoption`worker_threads`"),
        "{out}"
    );
    let out = error(Kind::Test, "start_paused", "async fn t() {}");
    assert!(out.contains("option`start_paused`needsavalue"), "{out}");
}

#[test]
fn bad_values_are_named() {
    let out = error(Kind::Test, "start_paused = 1", "async fn t() {}");
    assert!(
        out.contains("option`start_paused`takes`true`or`false`,not`1`"),
        "{out}"
    );
    let out = error(Kind::Test, "budget = 0", "async fn t() {}");
    assert!(
        out.contains("option`budget`takesanintegerofatleast1,not`0`"),
        "{out}"
    );
    let out = error(Kind::Main, "budget = \"many\"", "async fn main() {}");
    assert!(
        out.contains("option`budget`takesanintegerofatleast1"),
        "{out}"
    );
}

#[test]
fn repeated_option_and_second_test_attribute_are_refused() {
    let out = error(
        Kind::Test,
        "start_paused = true, start_paused = false",
        "async fn t() {}",
    );
    assert!(out.contains("option`start_paused`isgiventwice"), "{out}");
    let out = error(Kind::Test, "", "#[test] async fn t() {}");
    assert!(out.contains("alreadymakesthefunctiona`#[test]`"), "{out}");
}

#[test]
fn generics_and_non_functions_are_refused() {
    let out = error(Kind::Test, "", "async fn t<T>() {}");
    assert!(out.contains("`t`cannotbegeneric"), "{out}");
    let out = error(Kind::Main, "", "struct NotAFn;");
    assert!(
        out.contains("#[deliloop::main]appliestoan`asyncfn`"),
        "{out}"
    );
}
