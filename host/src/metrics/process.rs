//! The standard process metrics of Prometheus' client libraries (`process_*`), read from
//! `/proc/self` at scrape time: resident memory, open file descriptors and their limit, CPU
//! seconds and start time. Linux only; elsewhere nothing is written.
//!
//! Owns: reading `/proc`. Must not touch: the host's own counters.

use std::fmt::Write as _;

/// Appends the `process_*` gauges and counter, as far as `/proc/self` tells them.
pub fn render(out: &mut String) {
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields after the command (which may hold spaces), counted from field 3 (`state`).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let ticks = clock_ticks();
    if let (Some(utime), Some(stime)) = (field(14), field(15)) {
        metric(
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            (utime + stime) / ticks,
        );
    }
    if let Some(rss_kib) = vm_rss_kib() {
        metric(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            rss_kib * 1024.0,
        );
    }
    if let Some(vsize) = field(23) {
        metric(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            vsize,
        );
    }
    if let (Some(start_ticks), Some(boot)) = (field(22), boot_time()) {
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
            boot + start_ticks / ticks,
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        metric(
            "process_open_fds",
            "gauge",
            "Open file descriptors.",
            fds.count() as f64,
        );
    }
    if let Some(max) = max_fds() {
        metric(
            "process_max_fds",
            "gauge",
            "The limit on open file descriptors.",
            max,
        );
    }
}

/// Clock ticks per second in `/proc` (`USER_HZ`): fixed at 100 in the kernel's ABI on x86_64
/// and aarch64, whatever the kernel's own tick rate.
fn clock_ticks() -> f64 {
    100.0
}

/// `VmRSS` of `/proc/self/status`, in KiB (the kernel's own figure, no page size needed).
fn vm_rss_kib() -> Option<f64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn boot_time() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn max_fds() -> Option<f64> {
    std::fs::read_to_string("/proc/self/limits")
        .ok()?
        .lines()
        .find(|l| l.starts_with("Max open files"))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_reports_its_memory_fds_and_start_time() {
        let mut out = String::new();
        super::render(&mut out);
        let value = |name: &str| -> f64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing in {out}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
