//! `echo hi` through the real daemon's `bash` over HTTP, one call per request on one
//! connection (issue 19), beside what it costs elsewhere in the same run: a raw
//! `sh -c 'echo hi'` spawn (and `bash -c`, which toold runs), one bubblewrap spawn alone (the sandbox toold used to build per
//! call) and, when installed, SWE-ReX's `/execute`. toold runs unsandboxed (sandbox off,
//! unsandboxed runs allowed), under its per-session bubblewrap sandbox and under its
//! per-session Landlock sandbox, each on a daemon of its own configured by a settings file.
//!
//! The systems are sampled in alternating rounds, so that the machine's noise falls on all of
//! them alike; p50 and p99 over every round. A sandbox this machine lacks is reported as
//! skipped. SWE-ReX is `swerex-remote` from `TOOLD_BENCH_SWEREX`, else from `PATH`, else from
//! a venv at `$CARGO_TARGET_DIR/swerex-venv` (`python3 -m venv … && pip install swe-rex`);
//! absent, it is skipped with a note. Targets (issue 19): unsandboxed ≤ 2× the raw spawn,
//! each sandboxed mode ≤ 3×, every toold mode faster than SWE-ReX.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toold::tools::SandboxCapability;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;

const WARM_UP: usize = 30;
const ROUNDS: usize = 10;
const ROUND: usize = 50;

/// One thing measured: how to take one sample.
enum System {
    /// `sh -c 'echo hi'` spawned and waited for, output read.
    Spawn(Vec<String>),
    /// One request on a kept-alive connection.
    Http(Connection, PreparedRequest),
}

impl System {
    async fn sample(&mut self) -> Duration {
        let started = Instant::now();
        match self {
            System::Spawn(argv) => {
                let output = Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(Stdio::null())
                    .output()
                    .expect("spawns");
                assert_eq!(output.stdout, b"hi\n", "{argv:?}");
            }
            System::Http(connection, request) => {
                let response = connection.send(request).await.expect("a response");
                assert_eq!(response.status, 200);
            }
        }
        started.elapsed()
    }
}

struct Measured {
    name: String,
    system: System,
    samples: Vec<Duration>,
}

pub async fn report() {
    let capability = SandboxCapability::probe();
    // The reference is `sh`; toold runs `bash`, which alone starts slower than dash
    // (where `sh` is dash), so its raw spawn is shown too.
    let mut measured = vec![
        Measured::new(
            "raw sh -c 'echo hi' spawn",
            System::Spawn(vec!["sh".into(), "-c".into(), "echo hi".into()]),
        ),
        Measured::new(
            "raw bash -c 'echo hi' spawn",
            System::Spawn(vec!["bash".into(), "-c".into(), "echo hi".into()]),
        ),
    ];
    if capability.bubblewrap.is_ok() {
        let mut bwrap: Vec<String> = [
            "bwrap",
            "--die-with-parent",
            "--unshare-all",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--",
        ]
        .map(String::from)
        .to_vec();
        bwrap.extend(["sh", "-c", "echo hi"].map(String::from));
        measured.push(Measured::new(
            "one bubblewrap spawn alone",
            System::Spawn(bwrap),
        ));
    }
    let mut daemons = Vec::new();
    let modes = [
        ("none", "mode = \"off\"\nallow_unsandboxed = true\n", true),
        ("bwrap", "mode = \"bwrap\"\n", capability.bubblewrap.is_ok()),
        (
            "landlock",
            "mode = \"landlock\"\n",
            capability.landlock_abi.is_ok(),
        ),
    ];
    for (name, settings, available) in modes {
        if !available {
            println!("toold bash echo hi ({name}): skipped, this machine cannot run it");
            continue;
        }
        let (daemon, system, dir) = toold(name, settings).await;
        measured.push(Measured::new(
            &format!("toold bash, sandbox {name}"),
            system,
        ));
        daemons.push((daemon, dir));
    }
    let swerex = match SweRex::start().await {
        Ok((server, system)) => {
            measured.push(Measured::new("SWE-ReX /execute", system));
            Some(server)
        }
        Err(why) => {
            println!("SWE-ReX: skipped ({why})");
            None
        }
    };
    for entry in &mut measured {
        for _ in 0..WARM_UP {
            entry.system.sample().await;
        }
    }
    for _ in 0..ROUNDS {
        for entry in &mut measured {
            for _ in 0..ROUND {
                let sample = entry.system.sample().await;
                entry.samples.push(sample);
            }
        }
    }
    print_table(&mut measured);
    drop(swerex);
    for (daemon, _dir) in daemons {
        daemon.terminate();
    }
}

impl Measured {
    fn new(name: &str, system: System) -> Measured {
        Measured {
            name: name.to_owned(),
            system,
            samples: Vec::new(),
        }
    }
}

fn print_table(measured: &mut [Measured]) {
    let figures: Vec<(String, Duration, Duration)> = measured
        .iter_mut()
        .map(|m| {
            let (p50, p99) = super::percentiles(&mut m.samples);
            (m.name.clone(), p50, p99)
        })
        .collect();
    let raw = figures[0].1;
    let swerex = figures
        .iter()
        .find(|(name, ..)| name.starts_with("SWE-ReX"))
        .map(|(_, p50, _)| *p50);
    println!(
        "echo hi, {} samples each in {ROUNDS} alternating rounds (HTTP: one connection, one call per request):",
        ROUNDS * ROUND
    );
    for (name, p50, p99) in &figures {
        let ratio = p50.as_secs_f64() / raw.as_secs_f64();
        let target = if name.starts_with("toold") {
            let budget = if name.ends_with("none") { 2.0 } else { 3.0 };
            let faster = swerex.map_or(String::new(), |s| {
                format!(", faster than SWE-ReX: {}", super::verdict(*p50 < s))
            });
            format!(
                "  (target ≤ {budget}× raw: {}{faster})",
                super::verdict(ratio <= budget)
            )
        } else {
            String::new()
        };
        println!(
            "  {name:<30} p50 {:>7.2} ms  p99 {:>7.2} ms  {ratio:>5.1}× raw{target}",
            super::ms(*p50),
            super::ms(*p99),
        );
    }
}

/// A daemon with `[sandbox]` `settings`, a session, and its `bash echo hi` request.
async fn toold(name: &str, settings: &str) -> (Daemon, System, tempfile::TempDir) {
    let dir = super::fixture_dir();
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, format!("[sandbox]\n{settings}")).expect("settings file");
    let config = config.to_str().expect("UTF-8 path").to_owned();
    let daemon = Daemon::start_with(dir.path(), &["--config", &config]).await;
    let projects = super::projects_in(dir.path());
    let session = super::create_session(daemon.address, &projects).await;
    let request = PreparedRequest::post_json(
        daemon.address,
        &format!("/v1/sessions/{session}/batches"),
        &json!({"calls": [{"id": "t", "name": "bash", "input": {"command": "echo hi"}}]}),
    );
    let mut connection = Connection::open(daemon.address).await.expect("connects");
    let first = connection.send(&request).await.expect("a batch").json();
    let result = &first["results"][0];
    assert_eq!(result["output"], "hi\n", "bash echo hi runs: {first}");
    assert_eq!(
        result["metadata"]["sandbox"], name,
        "the sandbox asked for ran: {first}"
    );
    (daemon, System::Http(connection, request), dir)
}

/// `swerex-remote` on a free loopback port, killed when dropped.
struct SweRex(Child);

impl Drop for SweRex {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SWEREX_TOKEN: &str = "bench";

impl SweRex {
    async fn start() -> Result<(SweRex, System), String> {
        let program = swerex_program().ok_or(
            "swerex-remote not found (TOOLD_BENCH_SWEREX, PATH, or $CARGO_TARGET_DIR/swerex-venv; pip install swe-rex)",
        )?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|err| format!("no free port: {err}"))?
            .port();
        let child = Command::new(&program)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--auth-token", SWEREX_TOKEN])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| format!("cannot run {}: {err}", program.display()))?;
        let server = SweRex(child);
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let body = serde_json::to_vec(&json!({"command": "echo hi", "shell": true}))
            .map_err(|err| err.to_string())?;
        let request = PreparedRequest::with_headers(
            "POST",
            address,
            "/execute",
            &[("X-API-Key", SWEREX_TOKEN)],
            &body,
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut connection) = Connection::open(address).await
                && let Ok(response) = connection.send(&request).await
            {
                let reply = response.json();
                if response.status != 200 || reply["stdout"] != "hi\n" {
                    return Err(format!("unexpected answer {}: {reply}", response.status));
                }
                return Ok((server, System::Http(connection, request)));
            }
            if Instant::now() > deadline {
                return Err("swerex-remote did not listen within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn swerex_program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLD_BENCH_SWEREX") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("swerex-remote"))
            .find(|candidate| candidate.is_file())
    });
    on_path.or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")?;
        let venv = PathBuf::from(target).join("swerex-venv/bin/swerex-remote");
        venv.is_file().then_some(venv)
    })
}
