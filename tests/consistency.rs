//! Property tests of the consistency rules with in-process workers: random
//! interleavings of W workers with random per-clock deltas, under BSP, SSP
//! and async, by recorded handle and by keys (see `geeps_testkit::consistency`).

use geeps::InProcessCluster;
use geeps_testkit::consistency::{self as consistency_case, case, run_rank};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reads_respect_slack_and_sums_are_exact(case in case()) {
        let cluster = InProcessCluster::new(case.workers).unwrap();
        let threads: Vec<_> = (0..case.workers)
            .map(|rank| {
                let (case, t) = (case.clone(), cluster.transport(rank).unwrap());
                std::thread::spawn(move || run_rank(&case, rank, t))
            })
            .collect();
        for t in threads {
            let result = t.join().unwrap_or_else(|_| Err("worker thread panicked".into()));
            prop_assert!(result.is_ok(), "{:?}", result);
        }
    }

    #[test]
    fn cases_survive_their_text_form(case in case()) {
        prop_assert_eq!(consistency_case::Case::decode(&case.encode()).unwrap(), case);
    }
}
