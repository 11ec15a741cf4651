//! Environments (DESIGN §12), end to end through the real daemon against floors measured in the
//! same run (`cargo bench --bench environment`; `TOOLD_BENCH_BINARY` picks another build,
//! `TOOLD_BENCH_RUNS` the number of runs per row, default 20):
//!
//! - the cold pull of the tests' image (`POST /v1/images/pull`, a fresh daemon and data
//!   directory each run);
//! - the first `echo hi` in a fresh session on the cached image (create the session, then one
//!   `bash` call), under `bwrap`, beside `bwrap` running `/bin/sh -c 'echo hi'` over the
//!   cache's unpacked root (`<data_dir>/images/<hex>/rootfs`) bound read-only as `/` (the
//!   floor);
//! - the same under `gvisor`, beside `runsc do -root ROOT` over that root (`runsc do`'s own
//!   `-root` flag; with the daemon's global flags `--network=none --ignore-cgroups`);
//! - for attribution, no floor: the same first echo in a fresh plain session (no environment),
//!   whose first call starts the session's spawner as an environment session's does;
//! - a `bash` `echo hi` in a warm environment session (after its first call) beside the same in
//!   a warm plain session of the same daemon (no environment; the daemon's default sandbox).
//!
//! Rows alternate the measured and the floor run by run, so a neighbour's load falls on both.
//! Times are wall clock per request from this process over one kept-alive HTTP connection
//! (floors: spawn to exit, output read). Prints one table; numbers, not asserts (a call that
//! does not answer `hi` stops the bench: its figure would mean nothing).
//!
//! The test image is built exactly as the tests build it: `tests/it/support/registry.rs` is
//! included here as a module (busybox-static root, marker, `Env`, `umoci`, `skopeo` to a
//! loopback `docker-registry`); nothing reaches the internet.
//!
//! Figures (release, 2026-12-06, the 2-vCPU guest under contention; docs/performance.md,
//! "Environments: the benchmark", has the machine, the five runs and the attribution), p50:
//! cold pull 98–177 ms; first echo in a fresh bwrap session 60–97 ms (create 25–47 ms, of
//! it the `disk_mb` filesystem's mkfs and loop mount ~22 ms) against a 6–12 ms bwrap floor,
//! 8–11× (target ≤ 3× and ≤ 50 ms: missed); under gvisor 270–324 ms against `runsc do`'s
//! 134–168 ms, 2.0–2.1× (target ≤ 1.5×: missed); a warm echo 2.3 ms in the environment against
//! 1.7 ms in a plain session, 1.24–1.42× over 200 runs a side (target ≤ 1.2×: missed; an
//! environment session has no warm spare shell).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

#[path = "../tests/it/support/registry.rs"]
#[allow(dead_code)]
mod registry;

/// The first `name` on `PATH` (what `registry` asks of its parent module).
fn tool_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

struct Daemon {
    child: Child,
    base: String,
    dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

fn daemon(settings: &str) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, settings).unwrap();
    let binary = std::env::var_os("TOOLD_BENCH_BINARY")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toold").into());
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let base = line
        .trim()
        .strip_prefix("toold listening on ")
        .unwrap_or_else(|| panic!("the daemon did not start: {line:?}"))
        .to_owned();
    Daemon { child, base, dir }
}

/// One kept-alive HTTP connection's client, driven from this thread.
struct Http {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Http {
    fn new() -> Http {
        Http {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            client: reqwest::Client::new(),
        }
    }

    /// `method` `url` with a JSON body (if any); the answer's status and JSON.
    fn send(&self, method: reqwest::Method, url: &str, body: Option<&Value>) -> (u16, Value) {
        self.runtime.block_on(async {
            let mut request = self.client.request(method, url);
            if let Some(body) = body {
                request = request
                    .header("content-type", "application/json")
                    .body(serde_json::to_vec(body).unwrap());
            }
            let reply = request.send().await.unwrap();
            let status = reply.status().as_u16();
            let bytes = reply.bytes().await.unwrap();
            let value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            (status, value)
        })
    }

    fn post(&self, url: &str, body: &Value) -> Value {
        let (status, value) = self.send(reqwest::Method::POST, url, Some(body));
        assert!((200..300).contains(&status), "POST {url}: {status} {value}");
        value
    }

    fn delete(&self, url: &str) {
        let (status, value) = self.send(reqwest::Method::DELETE, url, None);
        assert!(
            (200..300).contains(&status),
            "DELETE {url}: {status} {value}"
        );
    }
}

fn session(http: &Http, daemon: &Daemon, environment: Option<Value>) -> String {
    let mut body = json!({"permission_mode": "workspace_write"});
    if let Some(environment) = environment {
        body["environment"] = environment;
    }
    let answer = http.post(&format!("{}/v1/sessions", daemon.base), &body);
    answer["id"].as_str().unwrap().to_owned()
}

/// One `bash` `echo hi` in `session`; the sandbox its result names.
fn echo(http: &Http, daemon: &Daemon, session: &str) -> String {
    let answer = http.post(
        &format!("{}/v1/sessions/{session}/batches", daemon.base),
        &json!({"calls": [{"id": "c1", "name": "bash", "input": {"command": "echo hi"}}]}),
    );
    let result = &answer["results"][0];
    assert!(
        result["is_error"] == false && result["output"].as_str().unwrap_or("").trim() == "hi",
        "echo hi: {result}"
    );
    result["metadata"]["sandbox"]
        .as_str()
        .unwrap_or("?")
        .to_owned()
}

fn timed<T>(what: impl FnOnce() -> T) -> (f64, T) {
    let started = Instant::now();
    let out = what();
    (started.elapsed().as_secs_f64(), out)
}

/// Runs `command`, checks it printed `hi`; its wall clock.
fn floor(command: &mut Command) -> f64 {
    let (seconds, out) = timed(|| command.stdin(Stdio::null()).output().unwrap());
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "hi",
        "{command:?}: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    seconds
}

/// Nearest-rank percentile `p` (0..1) of `samples`, in ms.
fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] * 1e3
}

fn row(what: &str, samples: &[f64]) -> f64 {
    let p50 = percentile(samples, 0.5);
    println!(
        "  {what:<62} {:>3} {p50:>9.1} {:>9.1}",
        samples.len(),
        percentile(samples, 0.9)
    );
    p50
}

fn ratio(what: &str, measured: f64, floor: f64, target: &str) {
    println!("  {what:<62} {:>23.2}x   target {target}", measured / floor);
}

/// `bwrap` running the echo over `root` as `/`; with a fresh `/proc` and `/dev` when `full`
/// (the root must then hold those mount points: a read-only root cannot take them).
fn bwrap_floor(root: &Path, full: bool) -> Command {
    let mut command = Command::new("bwrap");
    command
        .args(["--die-with-parent", "--unshare-all", "--cap-drop", "ALL"])
        .arg("--ro-bind")
        .arg(root)
        .arg("/");
    if full {
        command.args(["--dev", "/dev", "--proc", "/proc"]);
    }
    command
        .args(["--tmpfs", "/tmp", "--", "/bin/sh", "-c", "echo hi"])
        .current_dir("/");
    command
}

fn runsc_floor(state: &Path, root: &Path) -> Command {
    let mut command = Command::new("runsc");
    command
        .arg("--root")
        .arg(state)
        .args([
            "--network=none",
            "--ignore-cgroups",
            "do",
            "-quiet",
            "-root",
        ])
        .arg(root)
        .args(["/bin/sh", "-c", "echo hi"]);
    command
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if let Err(why) = registry::available() {
        eprintln!("skipping the environment bench: {why}");
        return;
    }
    let runs: usize = std::env::var("TOOLD_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let pulls = 5;
    let registry = registry::Registry::start();
    let image = registry.image("test/busybox:1");
    let settings = registry.settings();
    let http = Http::new();
    let gvisor = Command::new("runsc")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());

    println!(
        "environments (image {image}, {runs} runs a row)                 n   p50 ms    p90 ms"
    );

    // 1. Cold pulls: a fresh daemon (empty cache) each.
    let mut cold = Vec::new();
    for _ in 0..pulls {
        let fresh = daemon(&settings);
        let (seconds, _) = timed(|| {
            http.post(
                &format!("{}/v1/images/pull", fresh.base),
                &json!({"image": image}),
            )
        });
        cold.push(seconds);
    }
    row("cold pull (POST /v1/images/pull, empty cache)", &cold);

    // The daemon for the rest, its cache holding the image.
    let toold = daemon(&settings);
    let pulled = http.post(
        &format!("{}/v1/images/pull", toold.base),
        &json!({"image": image}),
    );
    let digest = pulled["digest"].as_str().unwrap();
    let root = toold
        .data()
        .join("images")
        .join(digest.trim_start_matches("sha256:"))
        .join("rootfs");
    assert!(
        root.join("bin/sh").exists(),
        "no root at {}",
        root.display()
    );

    // The bwrap floor with fresh /proc and /dev: the same bytes, copied once beside the cache
    // (outside any timing) with the two mount points added.
    let scratch = tempfile::tempdir().unwrap();
    let full_root = scratch.path().join("rootfs");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&root)
        .arg(&full_root)
        .status()
        .unwrap();
    assert!(copied.success());
    for point in ["proc", "dev"] {
        std::fs::create_dir_all(full_root.join(point)).unwrap();
    }
    let state = tempfile::tempdir().unwrap();

    // 2. and 3. The first echo in a fresh session, against its floors, alternating; "plain"
    // (no environment) is no floor but says what a session's creation and first call cost
    // without one.
    let mut tiers = vec!["plain", "bwrap"];
    if gvisor {
        tiers.push("gvisor");
    } else {
        eprintln!("runsc is not installed: no gvisor rows");
    }
    for tier in tiers {
        if tier == "gvisor" {
            // runsc installed is not runsc working (the daemon probes it at start).
            let (status, answer) = http.send(
                reqwest::Method::POST,
                &format!("{}/v1/sessions", toold.base),
                Some(&json!({"environment": {"image": image, "isolation": "gvisor"}})),
            );
            if status != 201 {
                println!("  (no gvisor rows: {status} {answer})");
                continue;
            }
            let id = answer["id"].as_str().unwrap();
            http.delete(&format!("{}/v1/sessions/{id}", toold.base));
        }
        let (mut first, mut create) = (Vec::new(), Vec::new());
        let mut floors: Vec<(&str, Vec<f64>)> = if tier == "plain" {
            Vec::new()
        } else if tier == "bwrap" {
            vec![
                (
                    "bwrap --ro-bind ROOT / --tmpfs /tmp sh -c 'echo hi' (floor)",
                    Vec::new(),
                ),
                (
                    "  the same, + --dev /dev --proc /proc (copy of ROOT)",
                    Vec::new(),
                ),
            ]
        } else {
            vec![("runsc do -root ROOT sh -c 'echo hi' (floor)", Vec::new())]
        };
        let mut sandbox = String::new();
        for _ in 0..runs {
            let started = Instant::now();
            let id = session(
                &http,
                &toold,
                (tier != "plain").then(|| json!({"image": image, "isolation": tier})),
            );
            let created = started.elapsed().as_secs_f64();
            sandbox = echo(&http, &toold, &id);
            first.push(started.elapsed().as_secs_f64());
            create.push(created);
            http.delete(&format!("{}/v1/sessions/{id}", toold.base));
            if tier == "bwrap" {
                floors[0].1.push(floor(&mut bwrap_floor(&root, false)));
                floors[1].1.push(floor(&mut bwrap_floor(&full_root, true)));
            } else if tier == "gvisor" {
                floors[0]
                    .1
                    .push(floor(&mut runsc_floor(state.path(), &root)));
            }
        }
        let sessions = if tier == "plain" {
            "plain session".to_owned()
        } else {
            format!("{tier} session")
        };
        let measured = row(
            &format!("first echo hi, fresh {sessions} (create + call)"),
            &first,
        );
        row("  of which the create (POST /v1/sessions)", &create);
        let target = if tier == "bwrap" {
            "<= 3x, p50 <= 50 ms"
        } else {
            "<= 1.5x"
        };
        for (name, samples) in &floors {
            let floor = row(name, samples);
            ratio(
                &format!("  ratio (the session's sandbox: {sandbox})"),
                measured,
                floor,
                target,
            );
        }
    }

    // 4. Warm echoes: an environment session and a plain one, alternating.
    let environment = session(
        &http,
        &toold,
        Some(json!({"image": image, "isolation": "bwrap"})),
    );
    let plain = session(&http, &toold, None);
    let (env_sandbox, plain_sandbox) = (
        echo(&http, &toold, &environment),
        echo(&http, &toold, &plain),
    );
    let (mut in_environment, mut in_plain) = (Vec::new(), Vec::new());
    for _ in 0..(runs * 10).max(200) {
        in_environment.push(timed(|| echo(&http, &toold, &environment)).0);
        in_plain.push(timed(|| echo(&http, &toold, &plain)).0);
    }
    let measured = row(
        &format!("warm echo hi, environment session ({env_sandbox})"),
        &in_environment,
    );
    let floor = row(
        &format!("warm echo hi, plain session ({plain_sandbox})"),
        &in_plain,
    );
    ratio("  ratio", measured, floor, "<= 1.2x");
}
