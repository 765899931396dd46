//! Labelled metric families in Prometheus' text format (0.0.4): counters and histograms keyed
//! by a fixed number of label values, each family owned by what it counts (a `Context`, the
//! HTTP capability), so several hosts in one process (the tests) keep their own figures.
//!
//! Why not a crate: `prometheus-client` writes OpenMetrics only (`# EOF`, `_total` beside the
//! family name), which cannot be appended to the text this endpoint has always served; the
//! `metrics` crates record into one global recorder, which many hosts in one process cannot
//! share. What the host needs of either is this page.
//!
//! Owns: label sets, their values and how they render. Must not touch: what is counted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Escapes a label value (`\`, `"`, newline) as the text format wants.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels<const N: usize>(names: &[&str; N], values: &[String; N]) -> String {
    names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A counter per label set.
pub struct Counters<const N: usize> {
    name: &'static str,
    help: &'static str,
    labels: [&'static str; N],
    values: Mutex<BTreeMap<[String; N], u64>>,
}

impl<const N: usize> Counters<N> {
    pub const fn new(name: &'static str, help: &'static str, labels: [&'static str; N]) -> Self {
        Self {
            name,
            help,
            labels,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn inc(&self, values: [&str; N]) {
        self.add(values, 1);
    }

    pub fn add(&self, values: [&str; N], n: u64) {
        let key = values.map(str::to_string);
        *self.lock().entry(key).or_default() += n;
    }

    /// The sum over the label sets `filter` accepts.
    pub fn sum(&self, filter: impl Fn(&[String; N]) -> bool) -> u64 {
        self.lock()
            .iter()
            .filter(|(k, _)| filter(k))
            .map(|(_, n)| n)
            .sum()
    }

    /// Label sets held (what bounds a family's memory).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, values: [&str; N]) -> bool {
        self.lock().contains_key(&values.map(str::to_string))
    }

    pub fn render(&self, out: &mut String) {
        header(out, self.name, "counter", self.help);
        for (k, n) in self.lock().iter() {
            let _ = writeln!(out, "{}{{{}}} {n}", self.name, labels(&self.labels, k));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<[String; N], u64>> {
        self.values.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Bucket counts, sum and count of one label set.
#[derive(Clone, Debug, Default)]
struct Observed {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

/// A histogram per label set, over fixed upper bounds (seconds).
pub struct Histograms<const N: usize> {
    name: &'static str,
    help: &'static str,
    labels: [&'static str; N],
    bounds: &'static [f64],
    values: Mutex<BTreeMap<[String; N], Observed>>,
}

impl<const N: usize> Histograms<N> {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: [&'static str; N],
        bounds: &'static [f64],
    ) -> Self {
        Self {
            name,
            help,
            labels,
            bounds,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn observe(&self, values: [&str; N], secs: f64) {
        let mut m = self.lock();
        let o = m.entry(values.map(str::to_string)).or_default();
        if o.buckets.is_empty() {
            o.buckets = vec![0; self.bounds.len()];
        }
        for (n, upper) in o.buckets.iter_mut().zip(self.bounds) {
            if secs <= *upper {
                *n += 1;
            }
        }
        o.sum += secs;
        o.count += 1;
    }

    pub fn contains(&self, values: [&str; N]) -> bool {
        self.lock().contains_key(&values.map(str::to_string))
    }

    /// Label sets held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Observations in the label sets `filter` accepts.
    pub fn count(&self, filter: impl Fn(&[String; N]) -> bool) -> u64 {
        self.lock()
            .iter()
            .filter(|(k, _)| filter(k))
            .map(|(_, o)| o.count)
            .sum()
    }

    pub fn render(&self, out: &mut String) {
        let name = self.name;
        header(out, name, "histogram", self.help);
        for (k, o) in self.lock().iter() {
            let l = labels(&self.labels, k);
            for (upper, n) in self.bounds.iter().zip(&o.buckets) {
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"{upper}\"}} {n}");
            }
            let (sum, count) = (o.sum, o.count);
            let _ = writeln!(
                out,
                "{name}_bucket{{{l},le=\"+Inf\"}} {count}\n{name}_sum{{{l}}} {sum}\n{name}_count{{{l}}} {count}"
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<[String; N], Observed>> {
        self.values.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<const N: usize> std::fmt::Debug for Counters<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counters({}, {} label sets)", self.name, self.len())
    }
}

impl<const N: usize> std::fmt::Debug for Histograms<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histograms({}, {} label sets)", self.name, self.len())
    }
}

/// A gauge per label set, rendered from values computed at scrape time.
pub fn render_gauges<const N: usize>(
    out: &mut String,
    name: &str,
    help: &str,
    label_names: [&str; N],
    values: impl IntoIterator<Item = ([String; N], u64)>,
) {
    header(out, name, "gauge", help);
    for (k, v) in values {
        let _ = writeln!(out, "{name}{{{}}} {v}", labels(&label_names, &k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_one_line_per_label_set_with_values_escaped() {
        let c = Counters::new("x_total", "Things.", ["kind", "phase"]);
        c.inc(["a", "Failed"]);
        c.add(["a", "Failed"], 2);
        c.inc(["b\"", "Succeeded"]);
        let mut out = String::new();
        c.render(&mut out);
        assert_eq!(
            out,
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind=\"a\",phase=\"Failed\"} 3\nx_total{kind=\"b\\\"\",phase=\"Succeeded\"} 1\n"
        );
        assert_eq!(c.sum(|k| k[1] == "Failed"), 3);
    }

    #[test]
    fn histograms_count_each_observation_in_every_bucket_at_or_above_it() {
        let h = Histograms::new("d_seconds", "Durations.", ["op"], &[0.1, 1.0]);
        h.observe(["r"], 0.05);
        h.observe(["r"], 0.5);
        h.observe(["r"], 3.0);
        let mut out = String::new();
        h.render(&mut out);
        assert!(
            out.contains("d_seconds_bucket{op=\"r\",le=\"0.1\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("d_seconds_bucket{op=\"r\",le=\"1\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("d_seconds_bucket{op=\"r\",le=\"+Inf\"} 3\n"),
            "{out}"
        );
        assert!(out.contains("d_seconds_sum{op=\"r\"} 3.55\n"), "{out}");
        assert!(out.contains("d_seconds_count{op=\"r\"} 3\n"), "{out}");
    }
}
