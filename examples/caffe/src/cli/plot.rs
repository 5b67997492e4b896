//! The learning-curve picture: training loss and test accuracy against
//! wall time, two panels in one PNG, drawn with plotters' bitmap backend and
//! the DejaVu font compiled into the binary (no system fonts needed). It
//! owns drawing only.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::cli::report::Point;
use crate::error::{Error, Result};

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        // A bundled font that fails to parse leaves text blank, nothing worse.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// Draws loss (top) and the test accuracy output `accuracy` (bottom) against seconds.
pub fn write_png(points: &[Point], accuracy: Option<&str>, title: &str, path: &Path) -> Result<()> {
    register_font();
    let fail = |e: &dyn std::fmt::Display| Error::file(path, format!("cannot draw the plot: {e}"));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, format!("cannot create: {e}")))?;
    }
    let loss: Vec<(f64, f64)> = points.iter().filter_map(|p| p.loss.map(|l| (p.seconds, f64::from(l)))).collect();
    let acc: Vec<(f64, f64)> = match accuracy {
        Some(name) => points
            .iter()
            .filter_map(|p| p.test.iter().find(|(n, _)| n == name).map(|(_, v)| (p.seconds, f64::from(*v))))
            .collect(),
        None => Vec::new(),
    };
    let t_max = points.iter().map(|p| p.seconds).fold(1e-3, f64::max);
    let root = BitMapBackend::new(path, (1000, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let root = root.titled(title, ("sans-serif", 24)).map_err(|e| fail(&e))?;
    let (top, bottom) = root.split_vertically(360);

    let l_max = loss.iter().map(|p| p.1).fold(0.1, f64::max) * 1.05;
    let mut c = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .caption("training loss (rank 0)", ("sans-serif", 18))
        .build_cartesian_2d(0.0..t_max, 0.0..l_max)
        .map_err(|e| fail(&e))?;
    c.configure_mesh().x_desc("seconds").y_desc("loss").draw().map_err(|e| fail(&e))?;
    c.draw_series(LineSeries::new(loss, &RED)).map_err(|e| fail(&e))?;

    let mut c = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .caption(format!("test {}", accuracy.unwrap_or("accuracy")), ("sans-serif", 18))
        .build_cartesian_2d(0.0..t_max, 0.0..1.0)
        .map_err(|e| fail(&e))?;
    c.configure_mesh().x_desc("seconds").y_desc("accuracy").draw().map_err(|e| fail(&e))?;
    c.draw_series(LineSeries::new(acc.clone(), &BLUE)).map_err(|e| fail(&e))?;
    c.draw_series(acc.into_iter().map(|p| Circle::new(p, 3, BLUE.filled()))).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
