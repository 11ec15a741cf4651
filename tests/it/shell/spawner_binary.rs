//! The daemon run from a binary under `/tmp` (where a new user's `cargo build` often puts it),
//! which bubblewrap's private `/tmp` used to hide from the session's spawner, so that every
//! `bash` call failed while the start-up probe said `bubblewrap=available`. Here: bash works
//! from such a copy under bubblewrap; a bubblewrap that cannot run (a `bwrap` on `PATH` that
//! exits 1) or that runs `true` but cannot start the spawner makes `auto` fall back to
//! Landlock, with bubblewrap's own reason in the log; `--sandbox landlock` and
//! `TOOLD_SANDBOX=landlock` work.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::daemon::without_settings;
use crate::support::deadline::{OutputWithin, STEP};

/// How long a daemon may take to print its listening line.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// A daemon started from `binary`, its stderr kept in `log`.
struct CopiedDaemon {
    child: Child,
    base: String,
    log: PathBuf,
    projects: PathBuf,
}

impl Drop for CopiedDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl CopiedDaemon {
    fn start(binary: &Path, dir: &Path, args: &[&str], env: &[(&str, String)]) -> CopiedDaemon {
        let projects = dir.join("projects");
        std::fs::create_dir_all(&projects).unwrap();
        let log = dir.join("toold.log");
        let mut command = Command::new(binary);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .arg("--allowed-root")
            .arg(&projects)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        without_settings(&mut command);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().expect("the copied toold starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(START_DEADLINE).unwrap_or_else(|_| {
            panic!(
                "no listening line within {START_DEADLINE:?}; log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        let base = line
            .trim()
            .strip_prefix("toold listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; log: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_owned();
        CopiedDaemon {
            child,
            base,
            log,
            projects,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One `bash` call in a new `workspace_write` session; its result.
    async fn bash(&self, command: &str) -> Value {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let post = |path: String, body: Value| {
            client
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
        };
        let session: Value = serde_json::from_slice(
            &post(
                "/v1/sessions".into(),
                json!({"working_directory": self.projects, "permission_mode": "workspace_write"}),
            )
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        )
        .unwrap();
        let id = session["id"].as_str().expect("a session id").to_owned();
        let batch: Value = serde_json::from_slice(
            &post(
                format!("/v1/sessions/{id}/batches"),
                json!({"calls": [{"id": "1", "name": "bash", "input": {"command": command}}]}),
            )
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        )
        .unwrap();
        batch["results"][0].clone()
    }
}

/// Writes an executable `bwrap` script into `dir/bin`; returns that directory.
fn fake_bwrap(dir: &Path, script: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("bwrap");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn assert_ran(result: &Value, sandbox: &str, log: &str) {
    assert_eq!(result["is_error"], false, "{result}\nlog: {log}");
    assert!(
        result["output"]
            .as_str()
            .unwrap_or("")
            .contains("hello from"),
        "{result}"
    );
    assert_eq!(
        result["metadata"]["sandbox"], sandbox,
        "{result}\nlog: {log}"
    );
}

#[tokio::test]
async fn bash_runs_from_a_binary_under_tmp_and_auto_falls_back_to_landlock_saying_why() {
    let Some(real_bwrap) = crate::support::tool_on_path("bwrap") else {
        crate::support::skip_unless_ci("bubblewrap (bwrap) is not installed");
        return;
    };
    let under_tmp = tempfile::Builder::new()
        .prefix("toold-copied-")
        .tempdir_in("/tmp")
        .unwrap();
    let binary = under_tmp.path().join("target/release/toold");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_toold"), &binary).unwrap();

    // Under bubblewrap, whose private /tmp would hide the binary but for its explicit bind.
    let dir = under_tmp.path().join("bwrap");
    let daemon = CopiedDaemon::start(&binary, &dir, &["--sandbox", "bwrap"], &[]);
    assert_ran(
        &daemon.bash("echo hello from bwrap").await,
        "bwrap",
        &daemon.log(),
    );
    drop(daemon);

    // A bubblewrap that cannot run at all: auto takes Landlock, and the log says why.
    let dir = under_tmp.path().join("broken");
    let bin = fake_bwrap(
        &dir,
        "#!/bin/sh\necho 'bwrap: creating new namespace failed: fake refusal' >&2\nexit 1\n",
    );
    let daemon = CopiedDaemon::start(&binary, &dir, &[], &[("PATH", path_with(&bin))]);
    assert_ran(
        &daemon.bash("echo hello from auto").await,
        "landlock",
        &daemon.log(),
    );
    let log = daemon.log();
    assert!(log.contains("fake refusal"), "{log}");
    assert!(log.contains("falling back to landlock"), "{log}");
    drop(daemon);

    // One that runs the old probe's `true` but cannot start the spawner: the trial through a
    // real spawner finds it.
    let dir = under_tmp.path().join("no-spawner");
    let bin = fake_bwrap(
        &dir,
        &format!(
            "#!/bin/sh\ncase \"$*\" in *sandbox-spawner*) echo 'bwrap: execvp toold: No such file or directory (fake)' >&2; exit 1;; esac\nexec {} \"$@\"\n",
            real_bwrap.display()
        ),
    );
    let daemon = CopiedDaemon::start(&binary, &dir, &[], &[("PATH", path_with(&bin))]);
    assert_ran(
        &daemon.bash("echo hello from auto").await,
        "landlock",
        &daemon.log(),
    );
    let log = daemon.log();
    assert!(log.contains("No such file or directory (fake)"), "{log}");
    assert!(log.contains("falling back to landlock"), "{log}");
    drop(daemon);

    // Landlock asked for by flag, and by environment variable.
    let dir = under_tmp.path().join("landlock-flag");
    let daemon = CopiedDaemon::start(&binary, &dir, &["--sandbox", "landlock"], &[]);
    assert_ran(
        &daemon.bash("echo hello from landlock").await,
        "landlock",
        &daemon.log(),
    );
    drop(daemon);
    let dir = under_tmp.path().join("landlock-env");
    let daemon = CopiedDaemon::start(
        &binary,
        &dir,
        &[],
        &[("TOOLD_SANDBOX", "landlock".to_owned())],
    );
    assert_ran(
        &daemon.bash("echo hello from landlock").await,
        "landlock",
        &daemon.log(),
    );
}

#[test]
fn an_unknown_sandbox_mode_is_refused_naming_the_choices() {
    let output = Command::new(env!("CARGO_BIN_EXE_toold"))
        .args(["serve", "--sandbox", "chroot"])
        .output_within(STEP, "toold serve")
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("chroot") && stderr.contains("landlock"),
        "{stderr}"
    );
}
