//! Small SVG charts for BENCHMARKS.md: lines on log axes, CDFs, bars.

use std::fmt::Write as _;

const W: f64 = 720.0;
const H: f64 = 400.0;
const L: f64 = 80.0;
const R: f64 = 250.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn header(title: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (L + W - R) / 2.0,
        esc(title)
    );
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut t = Vec::new();
    let mut v = 10f64.powf(lo.log10().floor());
    while v <= hi * 1.0001 {
        if v >= lo / 1.0001 {
            t.push(v);
        }
        v *= 10.0;
    }
    t
}

fn axes(s: &mut String, xlabel: &str, ylabel: &str) {
    let _ = write!(
        s,
        r#"<line x1="{L}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{}" stroke="black"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        H - B,
        W - R,
        H - B,
        H - B,
        (L + W - R) / 2.0,
        H - 15.0,
        esc(xlabel),
        (T + H - B) / 2.0,
        esc(ylabel)
    );
}

fn legend(s: &mut String, names: &[String]) {
    for (i, n) in names.iter().enumerate() {
        let y = T + 10.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            W - R + 12.0,
            y - 10.0,
            COLORS[i % COLORS.len()],
            W - R + 30.0,
            y,
            esc(n)
        );
    }
}

/// One line per series over categorical x positions, log y.
pub fn lines_log_y(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    xs: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3) / 1.5;
    let hi = all.iter().copied().fold(0.0, f64::max) * 1.5;
    let y = |v: f64| H - B - (v.log10() - lo.log10()) / (hi.log10() - lo.log10()) * (H - B - T);
    let x = |i: usize| L + 40.0 + i as f64 * (W - R - L - 80.0) / (xs.len().max(2) - 1) as f64;
    let mut s = header(title);
    axes(&mut s, xlabel, ylabel);
    for t in log_ticks(lo, hi) {
        let _ = write!(
            s,
            r##"<line x1="{L}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>"##,
            y(t),
            W - R,
            L - 5.0,
            y(t) + 4.0,
            crate::util::fmt_ns(t)
        );
    }
    for (i, label) in xs.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            x(i),
            H - B + 18.0,
            esc(label)
        );
    }
    for (k, (_, vals)) in series.iter().enumerate() {
        let pts: Vec<String> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let c = COLORS[k % COLORS.len()];
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for p in &pts {
            let (px, py) = p.split_once(',').unwrap();
            let _ = write!(s, r#"<circle cx="{px}" cy="{py}" r="3" fill="{c}"/>"#);
        }
    }
    legend(
        &mut s,
        &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );
    s.push_str("</svg>\n");
    s
}

/// Empirical CDFs of latency samples (ns), log x.
pub fn cdf_log_x(title: &str, series: &[(String, Vec<f64>)]) -> String {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1.0) / 1.2;
    let hi = all.iter().copied().fold(0.0, f64::max) * 1.2;
    let x = |v: f64| L + (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * (W - R - L);
    let y = |f: f64| H - B - f * (H - B - T);
    let mut s = header(title);
    axes(&mut s, "round-trip latency (log)", "fraction of pings");
    for t in log_ticks(lo, hi) {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{T}" x2="{0}" y2="{1}" stroke="#ddd"/><text x="{0}" y="{2}" text-anchor="middle">{3}</text>"##,
            x(t),
            H - B,
            H - B + 18.0,
            crate::util::fmt_ns(t)
        );
    }
    for f in [0.5, 0.9, 0.99] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{f}</text><line x1="{L}" y1="{1}" x2="{2}" y2="{1}" stroke="#eee"/>"##,
            L - 5.0,
            y(f),
            W - R
        );
    }
    for (k, (_, v)) in series.iter().enumerate() {
        let mut v = v.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        let step = (v.len() / 400).max(1);
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .step_by(step)
            .map(|(i, s)| format!("{:.1},{:.1}", x(*s), y((i + 1) as f64 / n)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            COLORS[k % COLORS.len()],
            pts.join(" ")
        );
    }
    legend(
        &mut s,
        &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );
    s.push_str("</svg>\n");
    s
}

/// Horizontal bars, one per (label, value), linear x.
pub fn bars(title: &str, xlabel: &str, items: &[(String, f64)]) -> String {
    let hi = items.iter().map(|(_, v)| *v).fold(0.0, f64::max) * 1.15;
    let h = T + 30.0 + items.len() as f64 * 26.0 + B;
    let mut s = header(title).replace(&format!("height=\"{H}\""), &format!("height=\"{h}\""));
    let lx = 330.0;
    for (i, (label, v)) in items.iter().enumerate() {
        let yy = T + 20.0 + i as f64 * 26.0;
        let w = v / hi * (W - lx - 40.0);
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{lx}" y="{}" width="{w:.1}" height="18" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            lx - 6.0,
            yy + 13.0,
            esc(label),
            yy,
            COLORS[i % COLORS.len()],
            lx + w + 4.0,
            yy + 13.0,
            crate::util::fmt_ns(*v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (lx + W) / 2.0,
        h - 15.0,
        esc(xlabel)
    );
    s.push_str("</svg>\n");
    s
}

/// Complementary CDFs: the fraction of samples (ns) at or above each x,
/// log x and log y, so that the tail shows; a dashed vertical line marks
/// `mark` (a deadline, say) with its label. Used by benches/frames.rs.
#[allow(dead_code)]
pub fn ccdf_log_log(
    title: &str,
    xlabel: &str,
    series: &[(String, Vec<f64>)],
    mark: Option<(f64, &str)>,
) -> String {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1.0) / 1.2;
    let hi = all.iter().copied().fold(0.0, f64::max) * 1.2;
    let n_max = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let y_lo = 1.0 / n_max / 2.0;
    let x = |v: f64| L + (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * (W - R - L);
    let y = |f: f64| H - B - (f.log10() - y_lo.log10()) / -y_lo.log10() * (H - B - T);
    let mut s = header(title);
    axes(&mut s, xlabel, "fraction at or above (log)");
    for t in log_ticks(lo, hi) {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{T}" x2="{0}" y2="{1}" stroke="#ddd"/><text x="{0}" y="{2}" text-anchor="middle">{3}</text>"##,
            x(t),
            H - B,
            H - B + 18.0,
            crate::util::fmt_ns(t)
        );
    }
    let mut f = 1.0;
    while f >= y_lo {
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{f}</text><line x1="{L}" y1="{1}" x2="{2}" y2="{1}" stroke="#eee"/>"##,
            L - 5.0,
            y(f),
            W - R
        );
        f /= 10.0;
    }
    if let Some((at, label)) = mark {
        let _ = write!(
            s,
            r##"<line x1="{0}" y1="{T}" x2="{0}" y2="{1}" stroke="black" stroke-dasharray="4 3"/><text x="{2}" y="{3}">{4}</text>"##,
            x(at),
            H - B,
            x(at) + 4.0,
            T + 12.0,
            esc(label)
        );
    }
    for (k, (_, v)) in series.iter().enumerate() {
        let mut v = v.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        // Every point of the last 1,000 (the tail), a few hundred before.
        let tail = v.len().saturating_sub(1_000);
        let step = (tail / 300).max(1);
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .filter(|(i, _)| *i >= tail || i % step == 0)
            .map(|(i, s)| format!("{:.1},{:.1}", x(*s), y((n - i as f64) / n)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            COLORS[k % COLORS.len()],
            pts.join(" ")
        );
    }
    legend(
        &mut s,
        &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    );
    s.push_str("</svg>\n");
    s
}
