//! The bytes of a transfer so far, on one line of stderr rewritten in place, when stderr is a
//! terminal; nothing at all otherwise (a pipe or a log gets no carriage returns). A line of
//! our own rather than a progress-bar crate: the total is unknown for a packed directory, so
//! a bar would have nothing to fill, and a counter is a dozen lines.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(100);

/// A transfer's byte counter.
pub struct Progress {
    /// `sent` or `received`.
    verb: &'static str,
    bytes: AtomicU64,
    /// When the line was last drawn; `None` when stderr is not a terminal.
    drawn: Option<Mutex<Instant>>,
}

impl Progress {
    pub fn start(verb: &'static str) -> Progress {
        let drawn = std::io::stderr()
            .is_terminal()
            .then(|| Mutex::new(Instant::now()));
        Progress {
            verb,
            bytes: AtomicU64::new(0),
            drawn,
        }
    }

    pub fn add(&self, bytes: usize) {
        let total = self.bytes.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        let Some(drawn) = &self.drawn else { return };
        let mut last = drawn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.elapsed() >= REDRAW {
            *last = Instant::now();
            self.draw(total, "");
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The last count, and the line ended.
    pub fn finish(&self) {
        if self.drawn.is_some() {
            self.draw(self.bytes(), "\n");
        }
    }

    fn draw(&self, total: u64, end: &str) {
        // `\x1b[K` clears what a longer earlier line left.
        let line = format!("\rtoold: {} {}\x1b[K{end}", self.verb, human_bytes(total));
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(line.as_bytes());
        let _ = stderr.flush();
    }
}

/// `1536` as `1.5 KiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_read_as_a_person_reads_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(20 << 20), "20.0 MiB");
    }
}
