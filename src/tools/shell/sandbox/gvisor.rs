//! The `gvisor` isolation tier of an environment (DESIGN §12): one gVisor sandbox (`runsc`,
//! a user-space kernel) per session, over the session's root.
//!
//! The sandbox is an OCI bundle written to `<data_dir>/runsc/bundles/<id>/config.json`: root =
//! the session's copy-on-write root (read-only, with `workdir` bound writable, below
//! `danger_full_access`), a fresh `/proc` and `/tmp` (gVisor makes its own `/dev`), and the
//! daemon's binary with the host's loader and libraries bound read-only under
//! [`super::bwrap::HOST_DIR`] exactly as the bubblewrap tier binds them. Its one process (its
//! init) is the session's spawner (`toold sandbox-spawner`), started by `runsc run` (not
//! detached: the `runsc run` process lives as long as the sandbox, so the spawner's liveness
//! checks and the daemon-death signal work as for bubblewrap).
//!
//! Why commands do not go through the spawner's control socket: gVisor imports the host
//! descriptors it is given (stdio) as host-backed files, and a host socket's `SCM_RIGHTS`
//! does not cross into it, so the spawner inside cannot receive a command's stdio; and a
//! process inside has no host pid for the daemon to signal. So the spawner's control socket is
//! the sandbox's stdin (a seqpacket socket, imported as one): it is only the sandbox's
//! lifeline, and when the daemon closes it (the session's spawner shuts down, or the daemon
//! dies) the spawner exits and the sandbox with it, then `runsc delete` clears its state.
//! Each command is a `runsc exec` on the host, in a process group of its own, with the
//! command's stdio as its own (runsc passes them in): that host process is what the daemon
//! waits for and signals (runsc forwards a signal it can catch to the command). One it cannot,
//! SIGKILL, ends `runsc exec` alone, so when `runsc exec` dies by a signal the command inside
//! is killed with its process group (each `runsc exec` process leads one inside) by the
//! spawner's binary run inside once more (`sandbox-spawner --kill-group`; `runsc kill` signals
//! single processes only), its sandbox-internal pid from `runsc exec --internal-pid-file`.
//! The cwd report (descriptor 3) does not cross either: the command is wrapped to open 3 on a
//! file of the bundle's `run/` directory (bound writable at `/.toold/run`), whose bytes the
//! daemon copies into the report pipe once `runsc exec` ended, so a `cd` carries over as in
//! the other tiers.
//!
//! What runsc needs: root (or `CAP_SYS_ADMIN`, `CAP_SYS_CHROOT`, `CAP_SETUID/GID`,
//! `CAP_SYS_PTRACE` for the default ptrace platform) on the host; in a container, the
//! container must allow `ptrace` and `mount` (e.g. `--cap-add SYS_ADMIN --cap-add SYS_PTRACE
//! --security-opt seccomp=unconfined --security-opt apparmor=unconfined`). `--ignore-cgroups`:
//! the session's cgroup (joined by `runsc run` before it execs) holds the whole sandbox, so
//! runsc configures none of its own. Probed once at start ([`Runsc::probe`]): `runsc --version`
//! and `runsc do true`; stale sandboxes a crashed daemon left in its state directory are
//! deleted then.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::process::Command;
use tokio::sync::watch;

use super::bwrap::HOST_DIR;
use super::spawner::{SpawnedShell, SpawnerPlan};
use super::{SandboxKind, ShellSandbox};

const RUNSC: &str = "runsc";
/// How long the start-up probe waits for `runsc do true`.
const PROBE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);
/// The bundle's directory bound writable at `/.toold/run` (the commands' cwd reports).
const RUN_DIR: &str = "run";

/// A working `runsc` and the state directory this daemon's sandboxes live in.
#[derive(Clone, Debug)]
pub(crate) struct Runsc {
    /// `runsc --root`: `<data_dir>/runsc/state`.
    state: PathBuf,
    /// Where bundles are written: `<data_dir>/runsc/bundles`.
    bundles: PathBuf,
}

/// One session's gVisor sandbox: how to run commands in it and to remove it.
#[derive(Clone, Debug)]
pub(crate) struct GvisorSandbox {
    state: PathBuf,
    bundle: PathBuf,
    /// The container id (`toold-<daemon pid>-<n>`).
    id: String,
    /// Set once `runsc state` said the sandbox runs (`runsc run` returns nothing to wait on).
    running: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Runsc {
    /// Whether runsc runs here (`Err` says why not); clears what a previous daemon left.
    pub(crate) async fn probe(data_dir: &Path) -> Result<Runsc, String> {
        let dir = data_dir.join("runsc");
        let runsc = Runsc {
            state: dir.join("state"),
            bundles: dir.join("bundles"),
        };
        for made in [&runsc.state, &runsc.bundles] {
            std::fs::create_dir_all(made)
                .map_err(|err| format!("cannot create \"{}\": {err}", made.display()))?;
        }
        let version = output(Command::new(RUNSC).arg("--version")).await?;
        let trial = tokio::time::timeout(
            PROBE_DEADLINE,
            output(Command::new(RUNSC).arg("--root").arg(&runsc.state).args([
                "--network=none",
                "--ignore-cgroups",
                "do",
                "true",
            ])),
        )
        .await
        .map_err(|_| format!("`runsc do true` did not end within {PROBE_DEADLINE:?}"))?;
        trial.map_err(|why| format!("`runsc do true` failed: {why}"))?;
        // Sandboxes of a daemon that died without closing them.
        if let Ok(list) = output(
            Command::new(RUNSC)
                .arg("--root")
                .arg(&runsc.state)
                .args(["list", "-quiet"]),
        )
        .await
        {
            for id in list.lines().filter(|id| id.starts_with("toold-")) {
                delete(&runsc.state, id).await;
            }
        }
        if let Ok(stale) = std::fs::read_dir(&runsc.bundles) {
            for entry in stale.flatten() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        tracing::info!(
            "gvisor available for environments: {}",
            version.lines().next().unwrap_or("runsc")
        );
        Ok(runsc)
    }
}

/// Runs `command`, returning its stdout, or its stderr as the error.
async fn output(command: &mut Command) -> Result<String, String> {
    command.stdin(Stdio::null()).kill_on_drop(true);
    let out = command
        .output()
        .await
        .map_err(|err| format!("cannot run {RUNSC}: {err}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

async fn delete(state: &Path, id: &str) {
    let _ = output(
        Command::new(RUNSC)
            .arg("--root")
            .arg(state)
            .args(["delete", "-force", id]),
    )
    .await;
}

/// Numbers this daemon's sandboxes (a session's next one never meets its last one's state).
static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl ShellSandbox {
    /// How to start the spawner of an environment session in a gVisor sandbox over its root
    /// (`network`: `network = "host"`).
    pub(super) fn gvisor_plan(
        &self,
        session_id: &str,
        environment: &crate::tool::EnvironmentView,
        network: bool,
    ) -> io::Result<SpawnerPlan> {
        let runsc = self
            .gvisor
            .clone()
            .ok_or_else(|| io::Error::other("gvisor (runsc) is not available on this daemon"))?;
        let mut plan = self.base_plan(session_id, Some(environment.limits))?;
        let toold = std::path::PathBuf::from(&plan.program);
        let id = format!(
            "toold-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let bundle = runsc.bundles.join(&id);
        std::fs::create_dir_all(bundle.join(RUN_DIR))?;
        let spawner: Vec<String> = [
            "sandbox-spawner",
            "--control-fd",
            "0",
            "--limits",
            &plan.limits.to_arg(),
            "--session",
            session_id,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let config = config(
            environment,
            &toold,
            &spawner,
            &bundle.join(RUN_DIR),
            network,
        );
        std::fs::write(
            bundle.join("config.json"),
            serde_json::to_vec_pretty(&config).map_err(io::Error::other)?,
        )?;
        plan.kind = SandboxKind::Gvisor;
        plan.program = RUNSC.into();
        plan.args = vec![
            "--root".into(),
            runsc.state.clone().into(),
            if network {
                "--network=host"
            } else {
                "--network=none"
            }
            .into(),
            "--ignore-cgroups".into(),
            "run".into(),
            "--bundle".into(),
            bundle.clone().into(),
            id.clone().into(),
        ];
        plan.environment = Some(environment.clone());
        plan.gvisor = Some(GvisorSandbox {
            state: runsc.state,
            bundle,
            id,
            running: Default::default(),
        });
        Ok(plan)
    }
}

/// The bundle's `config.json`: the session's root, the spawner as the one process.
fn config(
    environment: &crate::tool::EnvironmentView,
    toold: &Path,
    spawner: &[String],
    run: &Path,
    network: bool,
) -> Value {
    let host = Path::new(HOST_DIR);
    let mut args = vec![
        host.join("ld.so").display().to_string(),
        "--library-path".into(),
        host.join("lib").display().to_string(),
        host.join("toold").display().to_string(),
    ];
    args.extend(spawner.iter().cloned());
    let bind = |source: &Path, destination: &Path, writable: bool| {
        json!({
            "destination": destination,
            "type": "bind",
            "source": source,
            "options": ["rbind", if writable { "rw" } else { "ro" }],
        })
    };
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}),
    ];
    if !environment.writable_root {
        let inside = environment
            .workdir
            .strip_prefix("/")
            .unwrap_or(&environment.workdir);
        mounts.push(bind(
            &environment.root.join(inside),
            &environment.workdir,
            true,
        ));
    }
    mounts.extend([
        bind(
            Path::new(super::bwrap::HOST_LIBRARIES),
            &host.join("lib"),
            false,
        ),
        bind(
            Path::new(super::bwrap::HOST_LOADER),
            &host.join("ld.so"),
            false,
        ),
        bind(toold, &host.join("toold"), false),
        bind(run, &host.join(RUN_DIR), true),
    ]);
    // runsc's --network=host uses the network namespace runsc runs in: a new one (the
    // spec's) would be empty, so with the host's network the spec asks for none.
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if !network {
        namespaces.push(json!({"type": "network"}));
    }
    json!({
        "ociVersion": "1.0.0",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": environment.env,
            "cwd": environment.workdir,
        },
        "root": {"path": environment.root, "readonly": !environment.writable_root},
        "hostname": "toold",
        "mounts": mounts,
        "linux": {"namespaces": namespaces},
    })
}

impl GvisorSandbox {
    /// Starts `argv` in the sandbox in `cwd` (the environment's path) with `env` and `stdio`,
    /// as `runsc exec` in a process group of its own.
    pub(crate) async fn exec(
        &self,
        cwd: &Path,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        stdio: [OwnedFd; 3],
        report: Option<OwnedFd>,
    ) -> io::Result<SpawnedShell> {
        self.wait_running().await?;
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid_file = self.bundle.join(format!("exec-{n}.pid"));
        // The cwd report: descriptor 3 opened inside on a file of the bound `run` directory,
        // whose bytes are copied into `report` once the command ended.
        let report = report.map(|fd| (fd, format!("cwd-{n}")));
        let mut argv = argv.to_vec();
        if let (Some((_, name)), Some(shell)) = (&report, argv.first().cloned()) {
            let inside = Path::new(HOST_DIR).join(RUN_DIR).join(name);
            let mut wrapped: Vec<OsString> = vec![
                shell,
                "-c".into(),
                "exec 3>\"$0\"; exec \"$@\"".into(),
                inside.into(),
            ];
            wrapped.extend(argv);
            argv = wrapped;
        }
        let mut command = Command::new(RUNSC);
        command
            .arg("--root")
            .arg(&self.state)
            .arg("exec")
            .arg("--cwd")
            .arg(cwd)
            .arg("--internal-pid-file")
            .arg(&pid_file);
        for (name, value) in env {
            let mut pair = name.clone();
            pair.push("=");
            pair.push(value);
            command.arg("--env").arg(pair);
        }
        command.arg(&self.id).args(&argv);
        let [stdin, stdout, stderr] = stdio;
        command
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .kill_on_drop(false);
        super::super::process::clean_environment(&mut command);
        // SAFETY: setsid and prctl on integers only.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                // With the daemon dies the command's host side; the session's spawner (the
                // sandbox's init) takes the rest down when its control socket ends.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        drop(command);
        let pid = child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .ok_or_else(|| io::Error::other("runsc exec has no pid"))?;
        let (status_tx, status_rx) = watch::channel(None);
        let sandbox = self.clone();
        tokio::spawn(async move {
            let status = child.wait().await.map_err(|err| err.to_string());
            if let Ok(status) = &status
                && std::os::unix::process::ExitStatusExt::signal(status).is_some()
            {
                // runsc exec was killed (SIGKILL is not forwarded): kill the command inside.
                sandbox.kill_inside(&pid_file).await;
            }
            let _ = std::fs::remove_file(&pid_file);
            if let Some((fd, name)) = report {
                let file = sandbox.bundle.join(RUN_DIR).join(name);
                if let Ok(bytes) = std::fs::read(&file) {
                    let _ = std::io::Write::write_all(&mut std::fs::File::from(fd), &bytes);
                }
                let _ = std::fs::remove_file(&file);
            }
            status_tx.send_replace(Some(status));
        });
        Ok(SpawnedShell::new(pid, status_rx))
    }

    /// Waits (up to [`PROBE_DEADLINE`]) for the sandbox `runsc run` is starting to run.
    async fn wait_running(&self) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        let deadline = tokio::time::Instant::now() + PROBE_DEADLINE;
        while !self.running.load(Ordering::Acquire) {
            let state = output(
                Command::new(RUNSC)
                    .arg("--root")
                    .arg(&self.state)
                    .args(["state", &self.id]),
            )
            .await
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok());
            match state.as_ref().and_then(|s| s["status"].as_str()) {
                Some("running") => self.running.store(true, Ordering::Release),
                Some("stopped") => {
                    return Err(io::Error::other(
                        "the session's gVisor sandbox stopped; the next call starts a new one",
                    ));
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(io::Error::other(format!(
                        "the session's gVisor sandbox did not start within {PROBE_DEADLINE:?}"
                    )));
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        Ok(())
    }

    /// Kills the process group led by the process whose sandbox-internal pid `runsc exec`
    /// wrote to `pid_file` (each `runsc exec` process leads a group of its own inside): the
    /// spawner's binary run inside once more, with `--kill-group`, then `runsc kill --pid`
    /// for the leader in case that could not run.
    async fn kill_inside(&self, pid_file: &Path) {
        let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        else {
            return;
        };
        let host = Path::new(HOST_DIR);
        let _ = output(
            Command::new(RUNSC)
                .arg("--root")
                .arg(&self.state)
                .args(["exec", &self.id])
                .arg(host.join("ld.so"))
                .arg("--library-path")
                .arg(host.join("lib"))
                .arg(host.join("toold"))
                .args([
                    "sandbox-spawner",
                    "--control-fd=-1",
                    "--limits=0,0,0,0",
                    "--session=kill",
                    "--kill-group",
                    &pid.to_string(),
                ]),
        )
        .await;
        let _ = output(Command::new(RUNSC).arg("--root").arg(&self.state).args([
            "kill",
            "--pid",
            &pid.to_string(),
            &self.id,
            "KILL",
        ]))
        .await;
    }

    /// Removes the sandbox's state and its bundle (once its spawner is gone).
    pub(crate) async fn remove(&self) {
        delete(&self.state, &self.id).await;
        let _ = std::fs::remove_dir_all(&self.bundle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment(writable_root: bool) -> crate::tool::EnvironmentView {
        crate::tool::EnvironmentView {
            root: "/data/environments/s/root".into(),
            workdir: "/workspace".into(),
            env: vec!["PATH=/bin".into()],
            shell: "/bin/sh".into(),
            isolation: "gvisor",
            writable_root,
            limits: crate::tool::EnvironmentLimits::default(),
        }
    }

    #[test]
    fn the_bundle_binds_the_workspace_writable_over_a_read_only_root() {
        let config = config(
            &environment(false),
            Path::new("/usr/bin/toold"),
            &["sandbox-spawner".into()],
            Path::new("/b/run"),
            false,
        );
        assert!(
            config["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .contains(&json!({"type": "network"}))
        );
        assert_eq!(config["root"]["readonly"], true, "{config}");
        assert_eq!(config["process"]["cwd"], "/workspace");
        assert_eq!(config["process"]["args"][0], "/.toold/ld.so");
        assert_eq!(config["process"]["args"][4], "sandbox-spawner");
        let mounts = config["mounts"].as_array().unwrap();
        let workspace = mounts
            .iter()
            .find(|m| m["destination"] == "/workspace")
            .unwrap();
        assert_eq!(workspace["source"], "/data/environments/s/root/workspace");
        assert_eq!(workspace["options"][1], "rw");
        let toold = mounts
            .iter()
            .find(|m| m["destination"] == "/.toold/toold")
            .unwrap();
        assert_eq!(toold["source"], "/usr/bin/toold");
        assert_eq!(toold["options"][1], "ro");
    }

    #[test]
    fn a_full_access_session_gets_a_writable_root_and_no_workspace_bind() {
        let config = config(
            &environment(true),
            Path::new("/t"),
            &[],
            Path::new("/b/run"),
            false,
        );
        assert!(
            config["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .contains(&json!({"type": "network"}))
        );
        assert_eq!(config["root"]["readonly"], false, "{config}");
        assert!(
            !config["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["destination"] == "/workspace")
        );
    }
}
