//! PNG plots of the figures, drawn with plotters' bitmap backend and a font
//! shipped in a crate (DejaVu Sans), so nothing depends on the system's
//! fonts. One function per figure, each reading only its results struct;
//! it never measures or changes a result.

use std::path::Path;
use std::sync::Once;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::error::{BenchError, Result};
use crate::results::{LargeFigure, MemoryFigure, ScalingFigure, StallFigure, SyncFigure, TransportFigure};

const FONT: &str = "sans-serif";
static REGISTER: Once = Once::new();

const COMPUTE: RGBColor = RGBColor(66, 114, 196);
const STALL: RGBColor = RGBColor(214, 80, 64);
const BASELINE: RGBColor = RGBColor(110, 110, 110);
const TARGET: RGBColor = RGBColor(40, 150, 60);

fn register_font() {
    REGISTER.call_once(|| {
        // A font that fails to register leaves text blank, nothing worse.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

fn fail(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> BenchError + '_ {
    move |e| BenchError::msg(format!("cannot draw {}: {e}", path.display()))
}

/// Pixel offset that centres `text` above its point. Computed here because
/// the bundled font's layout reports no text extent for plotters' anchors.
fn above(text: &str, size: u32) -> (i32, i32) {
    let width = (text.chars().count() as f64 * size as f64 * 0.55) as i32;
    (-width / 2, -(size as i32) - 4)
}

/// Figure 14: stacked compute + stall per mini-batch, one panel per model.
pub fn stall(f: &StallFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (1400, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, f.models.len().max(1)));
    for (m, area) in f.models.iter().zip(panels.iter()) {
        let n = m.rows.len() as u32;
        let top = m.rows.iter().map(|r| r.compute_ms + r.stall_ms).fold(1e-3, f64::max) * 1.18;
        let labels: Vec<String> = m
            .rows
            .iter()
            .map(|r| {
                let who = match r.config.as_str() {
                    "GeePS-single-table" => "single",
                    other => other,
                };
                format!("{who} {}", r.slack.map(|s| s.to_string()).unwrap_or_else(|| "inf".into()))
            })
            .collect();
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: time per mini-batch, {} workers (bytes x{:.4})", m.model, f.meta.workers, m.scale.bytes),
                (FONT, 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0u32..n.saturating_sub(1)).into_segmented(), 0f64..top)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("configuration and slack")
            .y_desc("ms per mini-batch")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_labels(n as usize)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style((FONT, 13))
            .draw()
            .map_err(|e| err(&e))?;
        let bar = |i: u32, y0: f64, y1: f64, color: RGBColor| {
            let mut r =
                Rectangle::new([(SegmentValue::Exact(i), y0), (SegmentValue::Exact(i + 1), y1)], color.filled());
            r.set_margin(0, 0, 8, 8);
            r
        };
        chart
            .draw_series(m.rows.iter().enumerate().map(|(i, r)| bar(i as u32, 0.0, r.compute_ms, COMPUTE)))
            .map_err(|e| err(&e))?
            .label("compute")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], COMPUTE.filled()));
        chart
            .draw_series(
                m.rows.iter().enumerate().map(|(i, r)| bar(i as u32, r.compute_ms, r.compute_ms + r.stall_ms, STALL)),
            )
            .map_err(|e| err(&e))?
            .label("stall")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], STALL.filled()));
        chart
            .draw_series(m.rows.iter().enumerate().map(|(i, r)| {
                let text = format!("{:.0}%", r.stall_fraction * 100.0);
                let at = (SegmentValue::CenterOf(i as u32), r.compute_ms + r.stall_ms);
                EmptyElement::at(at) + Text::new(text.clone(), above(&text, 13), (FONT, 13).into_font())
            }))
            .map_err(|e| err(&e))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Figure 12: relative throughput against the budget fraction.
pub fn memory(f: &MemoryFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut pts: Vec<(f64, f64)> = f.points.iter().map(|p| (p.fraction * 100.0, p.relative)).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let top = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: throughput vs device memory budget ({} workers, BSP; 100% = {:.0} MB)",
                f.model,
                f.meta.workers,
                f.everything_fits_bytes as f64 / 1e6
            ),
            (FONT, 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..105f64, 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("device budget, % of everything-fits")
        .y_desc("throughput relative to everything-fits")
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(pts.clone(), COMPUTE.stroke_width(2)))
        .map_err(|e| err(&e))?
        .label("geeps")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], COMPUTE.stroke_width(2)));
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, COMPUTE.filled()))).map_err(|e| err(&e))?;
    let target = (f.target_fraction * 100.0, f.target_relative);
    chart
        .draw_series(std::iter::once(PathElement::new([(0.0, target.1), (105.0, target.1)], TARGET.stroke_width(1))))
        .map_err(|e| err(&e))?
        .label(format!("target {:.2}x at {:.0}%", target.1, target.0))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], TARGET.stroke_width(1)));
    chart
        .draw_series(std::iter::once(PathElement::new([(target.0, 0.0), (target.0, top)], TARGET.stroke_width(1))))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(std::iter::once(TriangleMarker::new((target.0, f.paper_relative), 7, STALL.filled())))
        .map_err(|e| err(&e))?
        .label(format!("paper: {:.2}x at {:.0}%", f.paper_relative, target.0))
        .legend(|(x, y)| TriangleMarker::new((x + 7, y), 5, STALL.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Figure 13: relative connections per second against model size.
pub fn large(f: &LargeFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let pts: Vec<(f64, f64, usize)> = f.points.iter().map(|p| (p.params_over_budget, p.relative, p.layers)).collect();
    let right = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.1;
    let top = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Synthetic FC model: connections/s vs size ({} workers, budget {:.0} MB)",
                f.meta.workers,
                f.device_memory as f64 / 1e6
            ),
            (FONT, 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..right, 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("parameters / device budget")
        .y_desc(format!("connections/s relative to {} layers", f.reference_layers))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), COMPUTE.stroke_width(2)))
        .map_err(|e| err(&e))?
        .label("geeps")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], COMPUTE.stroke_width(2)));
    chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4, COMPUTE.filled()))).map_err(|e| err(&e))?;
    chart
        .draw_series(pts.iter().map(|p| {
            let text = format!("{} layers", p.2);
            EmptyElement::at((p.0, p.1)) + Text::new(text.clone(), above(&text, 12), (FONT, 12).into_font())
        }))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            [(0.0, f.target_relative), (right, f.target_relative)],
            TARGET.stroke_width(1),
        )))
        .map_err(|e| err(&e))?
        .label(format!("target {:.2}x", f.target_relative))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], TARGET.stroke_width(1)));
    chart
        .draw_series(std::iter::once(PathElement::new([(1.0, 0.0), (1.0, top)], BASELINE.stroke_width(2))))
        .map_err(|e| err(&e))?
        .label("parameters = budget")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BASELINE.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Transport: baseline and engine bytes/s per worker, side by side.
pub fn transport(f: &TransportFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let n = f.rows.len() as u32;
    let top = f.rows.iter().map(|r| r.baseline_bytes_per_second.max(r.engine_bytes_per_second)).fold(1.0, f64::max)
        / 1e6
        * 1.15;
    let labels: Vec<String> = f.rows.iter().map(|r| format!("{}, {} workers", r.transport, r.workers)).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("BSP clock exchange of a {} MiB table, per worker", f.table_bytes >> 20), (FONT, 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..n.saturating_sub(1)).into_segmented(), 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("MB/s in + out")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_labels(n as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    let half = |i: usize, second: bool, v: f64, color: RGBColor| {
        let mut r = Rectangle::new(
            [(SegmentValue::Exact(i as u32), 0.0), (SegmentValue::Exact(i as u32 + 1), v / 1e6)],
            color.filled(),
        );
        // Two bars per segment: the left half for the baseline, the right for the engine.
        if second {
            r.set_margin(0, 0, 95, 20);
        } else {
            r.set_margin(0, 0, 20, 95);
        }
        r
    };
    chart
        .draw_series(f.rows.iter().enumerate().map(|(i, r)| half(i, false, r.baseline_bytes_per_second, BASELINE)))
        .map_err(|e| err(&e))?
        .label("baseline (raw TCP / memcpy threads)")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], BASELINE.filled()));
    chart
        .draw_series(f.rows.iter().enumerate().map(|(i, r)| half(i, true, r.engine_bytes_per_second, COMPUTE)))
        .map_err(|e| err(&e))?
        .label("geeps engine")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], COMPUTE.filled()));
    chart
        .draw_series(f.rows.iter().enumerate().map(|(i, r)| {
            let text = format!("{:.2}x", r.ratio);
            let at =
                (SegmentValue::CenterOf(i as u32), r.baseline_bytes_per_second.max(r.engine_bytes_per_second) / 1e6);
            EmptyElement::at(at) + Text::new(text.clone(), above(&text, 13), (FONT, 13).into_font())
        }))
        .map_err(|e| err(&e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A system's name short enough for an axis label under a bar.
fn short_system(system: &str) -> &str {
    match system {
        crate::sync::ENGINE => "geeps TCP",
        crate::sync::ENGINE_BF16 => "geeps bf16",
        crate::sync::ENGINE_BF16_BOTH => "geeps bf16x2",
        crate::sync::ENGINE_SHM => "geeps shm",
        crate::sync::RING => "ring TCP",
        "gloo (PyTorch)" => "gloo",
        "MPI over TCP" => "MPI TCP",
        "MPI over shared memory" => "MPI shm",
        other => other,
    }
}

/// Sync: milliseconds per clock of every system, grouped by rank count.
pub fn sync(f: &SyncFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let n = f.rows.len() as u32;
    let top = f.rows.iter().map(|r| r.ms_per_clock).fold(1.0, f64::max) * 1.2;
    let labels: Vec<String> = f.rows.iter().map(|r| format!("{}, {}", short_system(&r.system), r.workers)).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("One BSP clock of a {:.1} MB table (lower is better)", f.table_bytes as f64 / 1e6), (FONT, 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0u32..n.saturating_sub(1)).into_segmented(), 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("ms per clock")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_labels(n as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 10))
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(f.rows.iter().enumerate().map(|(i, r)| {
            let engine =
                [crate::sync::ENGINE, crate::sync::ENGINE_BF16, crate::sync::ENGINE_BF16_BOTH, crate::sync::ENGINE_SHM]
                    .contains(&r.system.as_str());
            let color = if engine { COMPUTE } else { BASELINE };
            let mut bar = Rectangle::new(
                [(SegmentValue::Exact(i as u32), 0.0), (SegmentValue::Exact(i as u32 + 1), r.ms_per_clock)],
                color.filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        }))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(f.rows.iter().enumerate().map(|(i, r)| {
            let text = format!("{:.0} ms", r.ms_per_clock);
            EmptyElement::at((SegmentValue::CenterOf(i as u32), r.ms_per_clock))
                + Text::new(text.clone(), above(&text, 13), (FONT, 13).into_font())
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Scaling: projected speedup of the engine against machines on both links,
/// overlapped (thick) and not (thin), beside the ideal line and the paper's point.
pub fn scaling(f: &ScalingFigure, path: &Path) -> Result<()> {
    register_font();
    let err = fail(path);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let right = f.rows.iter().map(|r| r.machines as f64).fold(2.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Projected speedup: {:.0} MB table, {:.0} ms compute per clock (model fitted on loopback)",
                f.table_bytes as f64 / 1e6,
                f.compute_ms
            ),
            (FONT, 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0.9f64..right).log_scale(), (0.9f64..right).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("machines")
        .y_desc("speedup over one machine")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    let ideal: Vec<(f64, f64)> = [1.0, right].iter().map(|&n| (n, n)).collect();
    chart
        .draw_series(LineSeries::new(ideal, BASELINE.stroke_width(1)))
        .map_err(|e| err(&e))?
        .label("ideal (N x)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BASELINE.stroke_width(1)));
    let mut links: Vec<f64> = Vec::new();
    for r in &f.rows {
        if !links.contains(&r.network_gbps) {
            links.push(r.network_gbps);
        }
    }
    for (i, gbps) in links.iter().enumerate() {
        let color = if i == 0 { COMPUTE } else { TARGET };
        for overlap in [true, false] {
            let mut pts: Vec<(f64, f64)> = f
                .rows
                .iter()
                .filter(|r| r.system == crate::sync::ENGINE && r.network_gbps == *gbps && r.overlap == overlap)
                .map(|r| (r.machines as f64, r.speedup))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let width = if overlap { 3 } else { 1 };
            let label = format!("geeps, {gbps} Gb/s, {}", if overlap { "overlap" } else { "no overlap" });
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(width)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
        }
    }
    let paper = (f.paper_machines as f64, f.paper_speedup);
    chart
        .draw_series(std::iter::once(TriangleMarker::new(paper, 8, STALL.filled())))
        .map_err(|e| err(&e))?
        .label(format!("paper: {:.0}x on {} machines (GoogLeNet)", paper.1, f.paper_machines))
        .legend(|(x, y)| TriangleMarker::new((x + 7, y), 5, STALL.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
