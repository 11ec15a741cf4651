//! The standard `process_*` series (as Prometheus' client libraries name them), read from
//! `/proc/self` when `/metrics` is rendered.
//!
//! Decision: read `/proc` ourselves instead of adding the `metrics-process` crate. That crate
//! records through the `metrics` facade into gauges, so its values would be as old as its last
//! `collect()` call and its counters (cpu seconds) would be gauges; reading five files at
//! render time gives current values with the types Prometheus expects, for no dependency.
//! Off Linux (no `/proc/self`) the series are left out.

use std::fmt::Write;

/// Clock ticks per second for `/proc/self/stat` times (`_SC_CLK_TCK`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;
const PAGE_SIZE: f64 = 4096.0;

/// The process series in Prometheus text format, or an empty string where `/proc` is absent.
pub fn render() -> String {
    let Some(stat) = read("/proc/self/stat") else {
        return String::new();
    };
    // Fields after the command (which is in parentheses and may contain spaces).
    let Some(after) = stat.rfind(')').map(|end| &stat[end + 2..]) else {
        return String::new();
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command, field 3 (state) is index 0: utime 14 → 11, stime 15 → 12,
    // starttime 22 → 19, vsize 23 → 20, rss 24 → 21.
    let field = |index: usize| -> f64 {
        fields
            .get(index)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let cpu = (field(11) + field(12)) / TICKS_PER_SECOND;
    let start = boot_time() + field(19) / TICKS_PER_SECOND;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count())
        .unwrap_or(0);
    let max_fds = read("/proc/self/limits")
        .and_then(|limits| {
            limits
                .lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3).map(str::to_owned))
        })
        .and_then(|soft| soft.parse::<f64>().ok());
    let mut text = String::new();
    let mut series = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = write!(
            text,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
        );
    };
    series(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        cpu,
    );
    series(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        field(21) * PAGE_SIZE,
    );
    series(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        field(20),
    );
    series(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        start,
    );
    series(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        open_fds as f64,
    );
    if let Some(max) = max_fds {
        series(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    text
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The boot time in seconds since the epoch (`btime` in `/proc/stat`).
fn boot_time() -> f64 {
    read("/proc/stat")
        .and_then(|stat| {
            stat.lines()
                .find_map(|line| line.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0)
}
