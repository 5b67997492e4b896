//! What a person watching a run sees: a progress bar over iterations,
//! Caffe-like log lines (iteration, loss, lr; test outputs at each test),
//! and the learning curve kept for the CSV and the plot. Only rank 0 reports.
//! It owns presentation; it must never decide when to test or what to log.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{Error, Result};

/// One row of the learning curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub iter: u64,
    /// Since training started.
    pub seconds: f64,
    pub lr: Option<f32>,
    /// Rank 0's training loss, averaged over `average_loss` iterations.
    pub loss: Option<f32>,
    /// Test outputs (name, value), when the net was tested here.
    pub test: Vec<(String, f32)>,
}

pub struct Reporter {
    bar: ProgressBar,
    start: Instant,
    /// Print log lines (off in tests).
    verbose: bool,
    pub points: Vec<Point>,
    /// The bar's message: the latest loss, then the latest test outputs.
    loss_msg: String,
    test_msg: String,
}

impl Reporter {
    /// `progress` shows the bar (on a terminal only).
    pub fn new(max_iter: u64, verbose: bool, progress: bool) -> Reporter {
        let target = if progress && verbose { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(max_iter), target);
        let style =
            ProgressStyle::with_template("{elapsed_precise} [{bar:36}] {pos}/{len} it, {per_sec} {msg} (eta {eta})")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Reporter {
            bar,
            start: Instant::now(),
            verbose,
            points: Vec::new(),
            loss_msg: String::new(),
            test_msg: String::new(),
        }
    }

    pub fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Prints a line above the bar.
    pub fn log(&self, line: &str) {
        if self.verbose {
            let stamped = format!("[{:8.2}s] {line}", self.seconds());
            self.bar.suspend(|| {
                println!("{stamped}");
                let _ = std::io::stdout().flush();
            });
        }
    }

    /// A display iteration: the loss line and the lr line, as Caffe prints them.
    pub fn train(&mut self, iter: u64, loss: f32, lr: f32, outputs: &[(String, f32, f32)]) {
        self.log(&format!("Iteration {iter}, loss = {loss}"));
        for (k, (name, v, weight)) in outputs.iter().enumerate() {
            let weighted = if *weight != 0.0 { format!(" (* {weight} = {} loss)", v * weight) } else { String::new() };
            self.log(&format!("    Train net output #{k}: {name} = {v}{weighted}"));
        }
        self.log(&format!("Iteration {iter}, lr = {lr}"));
        self.points.push(Point { iter, seconds: self.seconds(), lr: Some(lr), loss: Some(loss), test: Vec::new() });
        self.loss_msg = format!("loss {loss:.4}");
        self.bar.set_message(format!("{}{}", self.loss_msg, self.test_msg));
    }

    /// A test: the total loss when asked for (`test_compute_loss`), then one line per output.
    pub fn test(&mut self, iter: u64, outputs: &[(String, f32, f32)], loss: Option<f32>) {
        self.log(&format!("Iteration {iter}, Testing net (#0)"));
        if let Some(loss) = loss {
            self.log(&format!("Test loss: {loss}"));
        }
        let mut msg = String::new();
        for (k, (name, v, weight)) in outputs.iter().enumerate() {
            let weighted = if *weight != 0.0 { format!(" (* {weight} = {} loss)", v * weight) } else { String::new() };
            self.log(&format!("    Test net output #{k}: {name} = {v}{weighted}"));
            let _ = write!(msg, " test {name} {v:.4}");
        }
        let test = outputs.iter().map(|(n, v, _)| (n.clone(), *v)).collect();
        self.points.push(Point { iter, seconds: self.seconds(), lr: None, loss: None, test });
        self.test_msg = msg;
        self.bar.set_message(format!("{}{}", self.loss_msg, self.test_msg));
    }

    pub fn tick(&self) {
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Writes the curve: one row per point, a column per test output.
pub fn write_csv(points: &[Point], path: &Path) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    for p in points {
        for (n, _) in &p.test {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let mut out = String::from("iteration,seconds,lr,loss");
    for n in &names {
        let _ = write!(out, ",test_{n}");
    }
    out.push('\n');
    let opt = |v: Option<f32>| v.map(|x| x.to_string()).unwrap_or_default();
    for p in points {
        let _ = write!(out, "{},{:.3},{},{}", p.iter, p.seconds, opt(p.lr), opt(p.loss));
        for n in &names {
            let v = p.test.iter().find(|(m, _)| m == n).map(|(_, v)| *v);
            let _ = write!(out, ",{}", opt(v));
        }
        out.push('\n');
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, format!("cannot create: {e}")))?;
    }
    std::fs::write(path, out).map_err(|e| Error::file(path, format!("cannot write the curve: {e}")))
}

/// How the summary introduces the last test: at which iteration it ran,
/// and that it is older than the weights when training stopped later.
pub fn test_heading(tested_at: Option<u64>, iterations: u64) -> String {
    match tested_at {
        Some(0) if iterations > 0 => {
            format!("test at iteration 0 (before training; none since, training stopped at iteration {iterations})")
        }
        Some(at) if at < iterations => {
            format!("test at iteration {at} (the last one; training stopped at iteration {iterations})")
        }
        Some(at) => format!("test at iteration {at}"),
        None => "test".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_which_iteration_its_test_is_from() {
        assert_eq!(test_heading(Some(1000), 1000), "test at iteration 1000");
        assert_eq!(
            test_heading(Some(0), 43),
            "test at iteration 0 (before training; none since, training stopped at iteration 43)"
        );
        assert_eq!(
            test_heading(Some(500), 700),
            "test at iteration 500 (the last one; training stopped at iteration 700)"
        );
        assert_eq!(test_heading(None, 10), "test");
    }
}
