//! A small test runner for `harness = false` test targets, which are plain
//! programs: a target that re-runs itself as a child process (to kill it, or
//! to give it other settings read once per process) dispatches on its child
//! role first and hands its tests to [`run`] otherwise, so no helper ever
//! poses as a passing test. Understands what `cargo test` passes on:
//! name filters, `--exact`, `--list` (one `name: test` line each, as
//! libtest) and `--skip NAME`; other flags are accepted and ignored.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

/// One test: its name and its body (a panic fails it).
pub type Test = (&'static str, fn());

/// Flags of libtest that take a value, which is then no name filter.
const VALUED: [&str; 6] = ["--test-threads", "--skip", "--format", "--color", "--logfile", "-Z"];

/// Runs the `tests` the command line selects, libtest style; the exit code
/// says whether all passed.
pub fn run(tests: &[Test]) -> ExitCode {
    let (mut filters, mut skips, mut exact, mut list, mut ignored) = (Vec::new(), Vec::new(), false, false, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--exact" => exact = true,
            "--list" => list = true,
            "--ignored" => ignored = true,
            "--skip" => skips.extend(args.next()),
            f if VALUED.contains(&f) => {
                let _ = args.next();
            }
            f if f.starts_with('-') => {}
            _ => filters.push(a),
        }
    }
    let matches = |name: &str, f: &String| if exact { name == f } else { name.contains(f.as_str()) };
    // None of these tests is #[ignore]d, so `--ignored` selects none.
    let chosen: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| !ignored && (filters.is_empty() || filters.iter().any(|f| matches(name, f))))
        .filter(|(name, _)| !skips.iter().any(|s| matches(name, s)))
        .collect();
    if list {
        chosen.iter().for_each(|(name, _)| println!("{name}: test"));
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, body) in &chosen {
        let start = Instant::now();
        let ok = catch_unwind(AssertUnwindSafe(body)).is_ok();
        println!("test {name} ... {} ({:.1} s)", if ok { "ok" } else { "FAILED" }, start.elapsed().as_secs_f64());
        if !ok {
            failed.push(*name);
        }
    }
    let passed = chosen.len() - failed.len();
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!("\ntest result: {verdict}. {passed} passed; {} failed\n", failed.len());
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        failed.iter().for_each(|name| println!("failed: {name}"));
        ExitCode::FAILURE
    }
}
