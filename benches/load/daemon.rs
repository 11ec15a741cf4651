//! The real release daemon as a child process: started on port 0 over a fresh data
//! directory, its address read from the `toold listening on http://ADDR` line, its readiness
//! polled on `/readyz`, its memory read from `/proc/<pid>/status`, and SIGTERM at the end.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::client::{Connection, PreparedRequest};

pub struct Daemon {
    child: Child,
    pub address: SocketAddr,
    /// From spawning the process to the first `/readyz` 200.
    pub time_to_ready: Duration,
}

impl Daemon {
    /// Starts `toold serve` over `dir` (`data/`, and `projects/` as the allowed root).
    pub async fn start(dir: &Path) -> Daemon {
        Daemon::start_with(dir, &[]).await
    }

    /// [`Daemon::start`] with extra flags (`--database-url …`).
    pub async fn start_with(dir: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with_env(dir, extra, &[]).await
    }

    /// [`Daemon::start_with`] with `env` added to the daemon's environment (`OTEL_*`).
    pub async fn start_with_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let spawned = Instant::now();
        let mut child = Command::new(binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .arg("--allowed-root")
            .arg(dir.join("projects"))
            .args(extra)
            .env_remove("TOOLD_CONFIG")
            .env_remove("TOOLD_LISTEN")
            .env_remove("TOOLD_AUTH_TOKENS")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("toold starts");
        let address = listening_address(&mut child);
        let readyz = PreparedRequest::get(address, "/readyz");
        loop {
            // A fresh connection each time, as a probe makes it.
            if let Ok(mut connection) = Connection::open(address).await
                && let Ok(response) = connection.send(&readyz).await
                && response.status == 200
            {
                break;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        Daemon {
            child,
            address,
            time_to_ready: spawned.elapsed(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM and wait; whether it exited 0.
    pub fn terminate(mut self) -> bool {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().is_ok_and(|status| status.success())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon under test: `TOOLD_BENCH_BINARY` if set (to compare two builds with the same
/// client), else the `toold` cargo built for this bench.
fn binary() -> std::ffi::OsString {
    std::env::var_os("TOOLD_BENCH_BINARY")
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toold").into())
}

/// Reads the first stdout line, then keeps draining stdout on a thread so a later write
/// never meets a closed pipe.
fn listening_address(child: &mut Child) -> SocketAddr {
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("toold prints a line");
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    line.trim()
        .strip_prefix("toold listening on http://")
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
}

/// Resident memory of a process in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
