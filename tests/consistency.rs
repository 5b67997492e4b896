//! Property tests of the consistency rules with in-process workers: random
//! interleavings of W workers with random per-clock deltas, under BSP, SSP
//! and async, by recorded handle and by keys (see `geeps_testkit::consistency`),
//! on every device (`geeps_testkit::device_test!`).

use geeps::InProcessCluster;
use geeps_testkit::consistency::{self as consistency_case, case, run_rank_on};
use geeps_testkit::device_test;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

// Each case's reads must respect its slack and the final sums must be exact
// (the per-rank checks are in `run_rank_on`). The interleavings depend on
// timing, so the values are checked against exact bounds on each device, not
// compared across devices.
device_test!(reads_respect_slack_and_sums_are_exact, |backend| {
    // `source_file` replays the cases saved in consistency.proptest-regressions.
    let config = ProptestConfig { cases: 32, source_file: Some(file!()), ..ProptestConfig::default() };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |case| {
        let cluster = InProcessCluster::new(case.workers).unwrap();
        let threads: Vec<_> = (0..case.workers)
            .map(|rank| {
                let (case, t) = (case.clone(), cluster.transport(rank).unwrap());
                std::thread::spawn(move || run_rank_on(backend, &case, rank, t))
            })
            .collect();
        for t in threads {
            let result = t.join().unwrap_or_else(|_| Err("worker thread panicked".into()));
            result.map_err(|e| TestCaseError::fail(format!("{backend:?}: {e}")))?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
});

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn cases_survive_their_text_form(case in case()) {
        prop_assert_eq!(consistency_case::Case::decode(&case.encode()).unwrap(), case);
    }
}
