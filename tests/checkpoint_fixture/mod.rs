//! What the checkpoint suites share: a scratch folder per test and process,
//! an instance of the tables every checkpoint holds, and in-process
//! clusters of workers. Owns no assertions.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use geeps::{Config, Geeps, InProcessCluster, TableId, Transport};

/// Floats per row of every table.
pub const WIDTH: usize = 4;

/// An empty scratch folder for test `name` of this process.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("geeps-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// An instance of `rows` rows of "w", 3 of "bias" and 2 local rows on
/// `transport`, its (empty) recording finished.
pub fn build(transport: Arc<dyn Transport>, rows: u32) -> (Geeps, TableId, TableId) {
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_wait_deadline(Duration::from_secs(60)));
    let w = b.parameter_table("w", rows);
    let bias = b.parameter_table("bias", 3);
    b.local_table("scratch", 2);
    b.transport(transport);
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    (ps, w, bias)
}

/// Runs `body` for each of `workers` in-process workers, each on its own
/// thread with its transport; what each returned, by rank.
pub fn on_cluster<T: Send + 'static>(
    workers: usize,
    body: impl Fn(Arc<dyn Transport>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let cluster = InProcessCluster::new(workers).unwrap();
    let body = Arc::new(body);
    let threads: Vec<_> = (0..workers)
        .map(|rank| {
            let t = cluster.transport(rank).unwrap();
            let body = body.clone();
            std::thread::spawn(move || body(t))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}
