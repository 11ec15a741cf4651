//! The sandbox `bash` runs in: the `[sandbox]` settings, what this machine can do
//! ([`detect`]), the choice made once at start ([`ShellSandbox`]), and how a shell is confined
//! ([`Confinement`]): by the session's spawner ([`spawner`], one sandboxed process per session
//! that forks each command, speaking [`wire`]), started under bubblewrap ([`bwrap`]) or with a
//! Landlock ruleset applied once ([`landlock`]), with the session's [`limits`] (an
//! environment's over `[sandbox]`'s) and, in an environment, a [`watch`] on them per call;
//! an environment that asks for `gvisor` runs in a runsc sandbox instead ([`gvisor`], probed
//! at start by [`ShellSandbox::probe_gvisor`]), one on the `landlock` tier in its root by
//! `chroot` under a Landlock ruleset ([`landlock_tier`]).
//!
//! `mode = "auto"` takes bubblewrap where it works, else Landlock, else nothing; `"bwrap"` and
//! `"landlock"` take only that one; `"off"` takes none. "Works" is decided at start by
//! [`ShellSandbox::start`]: for each candidate the kernel offers, it starts the real spawner
//! the way a session's first call would and runs `true` through it, so a sandbox that can
//! create its namespaces but cannot reach the spawner's binary (a toold under `/tmp`, hidden
//! by the sandbox's own tmpfs, once made every bash call fail) is found then, its reason
//! (bubblewrap's own stderr) logged, and `auto` falls back to the next one, saying so. The
//! mode comes from `[sandbox] mode`, `TOOLD_SANDBOX` or `--sandbox`. With nothing,
//! bash runs unsandboxed only if `allow_unsandboxed`; otherwise every bash call below
//! `danger_full_access` is refused. A call authorised at `danger_full_access` (it names paths
//! outside the workspace and the session's mode allows that) runs unsandboxed: the sandbox
//! enforces what was authorised, and full access is not confined. Deliberately absent:
//! spawning the process (that is [`super::process`]) and the permission a call needs (that is
//! [`super::bash`], which asks [`ShellSandbox::confines`]).

mod bwrap;
mod detect;
mod gvisor;
mod landlock;
mod landlock_tier;
mod limits;
pub(crate) mod spawner;
mod watch;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::tool::{PermissionLevel, ToolError};

use limits::{LimitsBackend, SessionCgroup, SessionLimits};
pub use spawner::server::{
    Chroot as SpawnerChroot, kill_group as kill_group_inside, run as serve_spawner,
};
use spawner::{SessionSpawner, SpawnerPlan, SpawnerSet};
pub(crate) use watch::LimitMet;

/// `[sandbox]` settings (DESIGN §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Run bash unsandboxed when no sandbox can run (otherwise such calls are refused).
    pub allow_unsandboxed: bool,
    /// Whether a sandboxed shell may use the network.
    pub network: bool,
    /// Processes (and threads) a session's sandbox may hold at once; 0: no limit.
    pub pids: u64,
    /// Memory a session's sandbox may use, in bytes (per process under rlimits); 0: none.
    pub memory_bytes: u64,
    /// CPU seconds each process of a session's sandbox may use; 0: no limit.
    pub cpu_seconds: u64,
    /// Open files each process of a session's sandbox may hold; 0: no limit.
    pub open_files: u64,
    /// The most a foreground command's output takes in its spill file, in bytes.
    pub spill_bytes: u64,
}

impl Default for SandboxSettings {
    fn default() -> SandboxSettings {
        SandboxSettings {
            mode: SandboxMode::Auto,
            allow_unsandboxed: false,
            network: false,
            pids: 1024,
            memory_bytes: 4 << 30,
            cpu_seconds: 3600,
            open_files: 4096,
            spill_bytes: 1 << 30,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Bubblewrap, else Landlock, else none.
    #[default]
    Auto,
    Bwrap,
    Landlock,
    Off,
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    /// The names `[sandbox] mode` takes (`--sandbox`, `TOOLD_SANDBOX`).
    fn from_str(text: &str) -> Result<SandboxMode, String> {
        match text {
            "auto" => Ok(SandboxMode::Auto),
            "bwrap" => Ok(SandboxMode::Bwrap),
            "landlock" => Ok(SandboxMode::Landlock),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode \"{other}\"; expected one of auto, bwrap, landlock, off"
            )),
        }
    }
}

/// Which sandbox a shell ran in; reported as the result's `sandbox` metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxKind {
    Bubblewrap,
    Landlock,
    /// An environment's gVisor sandbox (`runsc`).
    Gvisor,
    None,
}

impl SandboxKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxKind::Bubblewrap => "bwrap",
            SandboxKind::Landlock => "landlock",
            SandboxKind::Gvisor => "gvisor",
            SandboxKind::None => "none",
        }
    }
}

/// What the machine offers, probed once.
#[derive(Clone, Debug)]
pub struct SandboxCapability {
    /// `Err` says why bubblewrap cannot run here.
    pub bubblewrap: Result<(), String>,
    /// The Landlock ABI, or why there is none.
    pub landlock_abi: Result<i32, String>,
}

impl SandboxCapability {
    /// Probes this machine (runs `bwrap` once; takes a few milliseconds).
    pub fn probe() -> SandboxCapability {
        SandboxCapability {
            bubblewrap: detect::probe_bubblewrap(BWRAP),
            landlock_abi: detect::landlock_abi(),
        }
    }
}

const BWRAP: &str = "bwrap";
/// How long the start-up trial waits for a spawner to run `true`.
const TRIAL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The sandboxes `mode` may take, in the order tried.
fn candidates(mode: SandboxMode) -> &'static [SandboxKind] {
    match mode {
        SandboxMode::Auto => &[SandboxKind::Bubblewrap, SandboxKind::Landlock],
        SandboxMode::Bwrap => &[SandboxKind::Bubblewrap],
        SandboxMode::Landlock => &[SandboxKind::Landlock],
        SandboxMode::Off => &[],
    }
}

/// Numbers session cgroups, so that a session's new spawner never meets its last one's cgroup
/// (removed only once its processes are gone).
static SPAWNERS_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Choice {
    Bubblewrap,
    Landlock { abi: i32 },
    Unsandboxed,
    Refused { why: String },
}

/// The sandbox every shell of this daemon runs in, chosen at start.
#[derive(Clone, Debug)]
pub struct ShellSandbox {
    choice: Choice,
    network: bool,
    /// Hidden from the sandboxes (the database, other sessions' workspaces).
    data_dir: Option<PathBuf>,
    /// Where Landlock sessions get their temporary directories.
    temp_root: PathBuf,
    /// The toold binary the spawner runs as, or why there is none.
    spawner_program: Result<PathBuf, String>,
    limits: SessionLimits,
    /// runsc, when it works here: environments may then ask for `gvisor`.
    gvisor: Option<gvisor::Runsc>,
    /// Whether environments' `landlock` tier can run here, or why not.
    environment_landlock: Result<(), String>,
}

impl Default for ShellSandbox {
    /// Unsandboxed, for libraries and tests that build the shell tools without a daemon; the
    /// shell then needs `danger_full_access` for anything that is not read-only.
    fn default() -> ShellSandbox {
        let settings = SandboxSettings::default();
        ShellSandbox {
            choice: Choice::Unsandboxed,
            network: true,
            data_dir: None,
            temp_root: std::env::temp_dir().join("toold-sandbox"),
            spawner_program: Err("no sandbox".into()),
            limits: SessionLimits::new(
                &settings,
                LimitsBackend::Rlimits {
                    why: "no sandbox".into(),
                },
            ),
            gvisor: None,
            environment_landlock: Err("no sandbox".into()),
        }
    }
}

impl ShellSandbox {
    /// Chooses per `settings` from what `capability` found. `data_dir` is the daemon's data
    /// directory: hidden from the sandboxes, and home of Landlock's per-session `tmp/`.
    pub fn resolve(
        settings: &SandboxSettings,
        capability: &SandboxCapability,
        data_dir: &Path,
    ) -> ShellSandbox {
        ShellSandbox::with_choice(settings, choose(settings, capability), data_dir)
    }

    /// Chooses per `settings` as [`ShellSandbox::resolve`] does, but takes a sandbox only once
    /// a real spawner started in it ran a command; returns the sandbox and, for each candidate
    /// passed over, why (for the start-up log).
    pub async fn start(
        settings: &SandboxSettings,
        capability: &SandboxCapability,
        data_dir: &Path,
    ) -> (ShellSandbox, Vec<String>) {
        let mut passed_over = Vec::new();
        for candidate in candidates(settings.mode) {
            let offered = match candidate {
                SandboxKind::Bubblewrap => {
                    capability.bubblewrap.clone().map(|()| Choice::Bubblewrap)
                }
                SandboxKind::Landlock => capability
                    .landlock_abi
                    .clone()
                    .map(|abi| Choice::Landlock { abi }),
                SandboxKind::None | SandboxKind::Gvisor => continue,
            };
            let tried = match offered {
                Ok(choice) => {
                    let sandbox = ShellSandbox::with_choice(settings, choice, data_dir);
                    match sandbox.trial(data_dir).await {
                        Ok(()) => return (sandbox, passed_over),
                        Err(why) => why,
                    }
                }
                Err(why) => why,
            };
            passed_over.push(format!("{}: {tried}", candidate.as_str()));
        }
        let why = match settings.mode {
            SandboxMode::Off => "[sandbox] mode is \"off\"".to_owned(),
            _ => passed_over.join("; "),
        };
        let choice = if settings.allow_unsandboxed {
            Choice::Unsandboxed
        } else {
            Choice::Refused { why }
        };
        (
            ShellSandbox::with_choice(settings, choice, data_dir),
            passed_over,
        )
    }

    fn with_choice(settings: &SandboxSettings, choice: Choice, data_dir: &Path) -> ShellSandbox {
        let confines = matches!(choice, Choice::Bubblewrap | Choice::Landlock { .. });
        let backend = if confines {
            LimitsBackend::probe()
        } else {
            LimitsBackend::Rlimits {
                why: "no sandbox".into(),
            }
        };
        ShellSandbox {
            choice,
            network: settings.network,
            data_dir: Some(data_dir.to_owned()),
            temp_root: data_dir.join("sandbox-tmp"),
            spawner_program: find_toold(),
            limits: SessionLimits::new(settings, backend),
            gvisor: None,
            environment_landlock: Err("not probed".into()),
        }
    }

    /// The same sandbox, offering environments the `landlock` tier when the kernel has
    /// Landlock (`capability`) and this daemon may change a process's root
    /// (`CAP_SYS_CHROOT`); see [`landlock_tier`].
    pub fn with_environment_landlock(mut self, capability: &SandboxCapability) -> ShellSandbox {
        self.environment_landlock = capability
            .landlock_abi
            .clone()
            .and_then(|_| landlock_tier::may_chroot());
        self
    }

    /// Whether environments may run under the `landlock` tier, or why not.
    pub fn environment_landlock(&self) -> Result<(), String> {
        self.environment_landlock.clone()
    }

    /// Probes `runsc` for environments (once, at start; concurrently with [`Self::start`]).
    pub(crate) async fn probe_gvisor(data_dir: &Path) -> Result<gvisor::Runsc, String> {
        gvisor::Runsc::probe(data_dir).await
    }

    /// The same sandbox, offering gVisor to environments when `probed` found runsc working.
    pub(crate) fn with_gvisor(mut self, probed: Option<gvisor::Runsc>) -> ShellSandbox {
        self.gvisor = probed;
        self
    }

    /// Whether environments may run under gVisor.
    pub fn gvisor_available(&self) -> bool {
        self.gvisor.is_some()
    }

    /// Starts a spawner in this sandbox, as a session's first call would, and runs `true`
    /// through it; `Err` says why that failed (with the spawner's stderr).
    async fn trial(&self, data_dir: &Path) -> Result<(), String> {
        const SESSION: &str = "sandbox-probe";
        let workspace = data_dir.join(SESSION);
        std::fs::create_dir_all(&workspace).map_err(|err| {
            format!(
                "cannot create the probe's workspace \"{}\": {err}",
                workspace.display()
            )
        })?;
        let spawners = SpawnerSet::default();
        let confinement = self
            .confine(
                &spawners,
                (SESSION, None),
                &workspace,
                PermissionLevel::WorkspaceWrite,
                false,
                None,
            )
            .map_err(|err| err.message().to_owned())?;
        let Confinement::Spawner(spawner) = confinement else {
            return Ok(());
        };
        let ran = tokio::time::timeout(TRIAL_DEADLINE, async {
            let null = || {
                std::fs::File::options()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
            };
            let stdio = [null()?.into(), null()?.into(), null()?.into()];
            let mut shell = spawner
                .run(&workspace, vec!["true".into()], stdio, Vec::new(), &[])
                .await?;
            shell.wait().await
        })
        .await;
        spawners.shut_down(SESSION).await;
        let _ = std::fs::remove_dir_all(self.session_temp_dir(SESSION));
        let _ = std::fs::remove_dir(&workspace);
        match ran {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("`true` run in it ended with {status}")),
            Ok(Err(err)) => Err(err.to_string()),
            Err(_) => Err(format!(
                "its spawner did not run `true` within {} s",
                TRIAL_DEADLINE.as_secs()
            )),
        }
    }

    /// The same sandbox with its spawner run as `program` (a toold binary).
    pub fn with_spawner_program(mut self, program: PathBuf) -> ShellSandbox {
        self.spawner_program = Ok(program);
        self
    }

    /// The sandbox shells run in (`None` when unsandboxed or refused).
    pub fn kind(&self) -> SandboxKind {
        match self.choice {
            Choice::Bubblewrap => SandboxKind::Bubblewrap,
            Choice::Landlock { .. } => SandboxKind::Landlock,
            Choice::Unsandboxed | Choice::Refused { .. } => SandboxKind::None,
        }
    }

    /// Whether shells are confined to the workspace (so a write there needs only
    /// `workspace_write`).
    pub fn confines(&self) -> bool {
        matches!(self.choice, Choice::Bubblewrap | Choice::Landlock { .. })
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        let network = if self.network { "on" } else { "off" };
        let limits = self.limits.backend.describe();
        match &self.choice {
            Choice::Bubblewrap => {
                format!(
                    "bash runs in one bubblewrap sandbox per session (network {network}); {limits}"
                )
            }
            Choice::Landlock { abi } => {
                format!(
                    "bash runs under one landlock ABI {abi} sandbox per session (network {network}); {limits}"
                )
            }
            Choice::Unsandboxed => "bash runs unsandboxed ([sandbox] allow_unsandboxed)".into(),
            Choice::Refused { why } => format!(
                "no sandbox for bash ({why}); bash calls below danger_full_access are refused"
            ),
        }
    }

    /// The session's temporary directory under Landlock (removed when the session closes).
    pub(crate) fn session_temp_dir(&self, session_id: &str) -> PathBuf {
        self.temp_root.join(session_id)
    }

    /// How to confine a shell of `session_id` (whose state is `owner`) in `workspace` for a
    /// call authorised at `authorized`: not at all, or by the session's spawner in `spawners`
    /// (started now if the session has none). The shell gets the network only if the session asked for it
    /// (`network_requested`) and the server allows it.
    pub(crate) fn confine(
        &self,
        spawners: &SpawnerSet,
        (session_id, owner): (&str, spawner::Owner),
        workspace: &Path,
        authorized: PermissionLevel,
        network_requested: bool,
        environment: Option<&crate::tool::EnvironmentView>,
    ) -> Result<Confinement, ToolError> {
        if let Some(environment) = environment {
            // Every call of an environment session runs inside it, whatever its mode.
            return spawners
                .get_or_start(session_id, owner, || {
                    self.environment_plan(session_id, environment, network_requested)
                })
                .map(Confinement::Spawner)
                .map_err(|err| {
                    ToolError::Execution(format!(
                        "cannot start the session's environment sandbox: {err}"
                    ))
                });
        }
        if authorized >= PermissionLevel::DangerFullAccess {
            return Ok(Confinement::None);
        }
        match &self.choice {
            Choice::Unsandboxed => Ok(Confinement::None),
            Choice::Refused { why } => Err(ToolError::Execution(format!(
                "no sandbox can confine bash on this machine ({why}); the operator can set [sandbox] allow_unsandboxed = true, or the call needs danger_full_access"
            ))),
            Choice::Bubblewrap | Choice::Landlock { .. } => spawners
                .get_or_start(session_id, owner, || {
                    self.spawner_plan(session_id, workspace, self.network && network_requested)
                })
                .map(Confinement::Spawner)
                .map_err(|err| {
                    ToolError::Execution(format!("cannot start the session's sandbox: {err}"))
                }),
        }
    }

    /// How to start the spawner of an environment session in its tier: bubblewrap over its
    /// root, the landlock tier ([`landlock_tier`]) or gVisor (`network`: `network = "host"`).
    fn environment_plan(
        &self,
        session_id: &str,
        environment: &crate::tool::EnvironmentView,
        network: bool,
    ) -> std::io::Result<SpawnerPlan> {
        if environment.isolation == "gvisor" {
            return self.gvisor_plan(session_id, environment, network);
        }
        if environment.isolation == "landlock" {
            self.environment_landlock().map_err(std::io::Error::other)?;
            let mut plan = self.base_plan(session_id, Some(environment.limits))?;
            plan.kind = SandboxKind::Landlock;
            plan.spawner_args = landlock_tier::spawner_args(environment, network)?;
            plan.environment = Some(environment.clone());
            return Ok(plan);
        }
        if environment.isolation != "bwrap" {
            return Err(std::io::Error::other(format!(
                "isolation \"{}\" cannot run an environment here yet",
                environment.isolation
            )));
        }
        let mut plan = self.base_plan(session_id, Some(environment.limits))?;
        let toold = PathBuf::from(&plan.program);
        plan.kind = SandboxKind::Bubblewrap;
        plan.program = BWRAP.into();
        plan.args = bwrap::environment_arguments(
            &environment.root,
            &environment.workdir,
            environment.writable_root,
            network,
            &toold,
        );
        plan.environment = Some(environment.clone());
        Ok(plan)
    }

    /// A spawner of `session_id` run as toold itself, unconfined, in the session's cgroup
    /// (`environment`: its limits over `[sandbox]`'s); each sandbox adds its confinement.
    fn base_plan(
        &self,
        session_id: &str,
        environment: Option<crate::tool::EnvironmentLimits>,
    ) -> std::io::Result<SpawnerPlan> {
        let toold = self.spawner_program.clone().map_err(|why| {
            std::io::Error::other(format!("no toold binary to run the spawner: {why}"))
        })?;
        let cgroup = SessionCgroup::create(
            &self.limits.backend,
            &format!(
                "toold-{}-{session_id}-{}",
                std::process::id(),
                SPAWNERS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            self.limits.cgroup(environment),
        )?;
        Ok(SpawnerPlan {
            kind: SandboxKind::None,
            program: toold.into(),
            args: Vec::new(),
            spawner_args: Vec::new(),
            landlock: None,
            env: Vec::new(),
            cgroup,
            limits: self.limits.child(self.limits.cgroup(environment)),
            cgroup_limits: self.limits.cgroup(environment),
            limits_name: self.limits.backend.name(),
            environment: None,
            gvisor: None,
        })
    }

    /// How to start the spawner of a plain session `session_id` in this daemon's sandbox.
    fn spawner_plan(
        &self,
        session_id: &str,
        workspace: &Path,
        network: bool,
    ) -> std::io::Result<SpawnerPlan> {
        let mut plan = self.base_plan(session_id, None)?;
        let toold = PathBuf::from(&plan.program);
        match &self.choice {
            Choice::Bubblewrap => {
                plan.kind = SandboxKind::Bubblewrap;
                plan.program = BWRAP.into();
                plan.args = bwrap::arguments(
                    workspace,
                    workspace,
                    self.data_dir.as_deref(),
                    network,
                    Some(&toold),
                );
                plan.args.push(toold.into());
            }
            Choice::Landlock { abi } => {
                let temp = self.session_temp_dir(session_id);
                std::fs::create_dir_all(&temp).map_err(|err| {
                    std::io::Error::other(format!(
                        "cannot create the sandbox's temporary directory \"{}\": {err}",
                        temp.display()
                    ))
                })?;
                let mut readable = landlock::readable_around(self.data_dir.as_deref());
                // The spawner's binary itself, which may lie in the hidden data directory.
                readable.push(toold.clone());
                let ruleset = landlock::ruleset(*abi, &readable, &[workspace, &temp], network)
                    .map_err(std::io::Error::other)?;
                plan.kind = SandboxKind::Landlock;
                plan.landlock = Some(ruleset);
                plan.env.push(("TMPDIR".into(), temp.into()));
            }
            Choice::Unsandboxed | Choice::Refused { .. } => {
                return Err(std::io::Error::other("no sandbox was chosen"));
            }
        }
        Ok(plan)
    }
}

fn choose(settings: &SandboxSettings, capability: &SandboxCapability) -> Choice {
    let bubblewrap = capability.bubblewrap.clone();
    let landlock = capability.landlock_abi.clone();
    let picked = match settings.mode {
        SandboxMode::Auto => bubblewrap.map(|()| Choice::Bubblewrap).or_else(|bw| {
            landlock
                .map(|abi| Choice::Landlock { abi })
                .map_err(|ll| format!("{bw}; {ll}"))
        }),
        SandboxMode::Bwrap => bubblewrap.map(|()| Choice::Bubblewrap),
        SandboxMode::Landlock => landlock.map(|abi| Choice::Landlock { abi }),
        SandboxMode::Off => Err("[sandbox] mode is \"off\"".to_owned()),
    };
    match picked {
        Ok(choice) => choice,
        Err(_) if settings.allow_unsandboxed => Choice::Unsandboxed,
        Err(why) => Choice::Refused { why },
    }
}

/// The toold binary to run spawners as: this executable when it is toold, else a `toold`
/// beside it or one directory up (where cargo puts it for integration tests and benches,
/// whose executables are `deps/<name>-<hash>`).
fn find_toold() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|err| format!("no current executable: {err}"))?;
    if exe.file_name().is_some_and(|name| name == "toold") {
        return Ok(exe);
    }
    let dir = exe.parent().ok_or("the executable has no directory")?;
    [dir.join("toold"), dir.join("../toold")]
        .into_iter()
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "\"{}\" is not toold and has no toold beside it",
                exe.display()
            )
        })
}

/// How one shell is confined.
#[derive(Clone, Debug)]
pub(crate) enum Confinement {
    None,
    /// Started by the session's spawner, inside its sandbox.
    Spawner(Arc<SessionSpawner>),
}

impl Confinement {
    pub(crate) fn kind(&self) -> SandboxKind {
        match self {
            Confinement::None => SandboxKind::None,
            Confinement::Spawner(spawner) => spawner.kind(),
        }
    }

    /// The result's `limits` metadata: where the session's limits are enforced.
    pub(crate) fn limits_name(&self) -> &'static str {
        match self {
            Confinement::None => "none",
            Confinement::Spawner(spawner) => spawner.limits_name(),
        }
    }
}

#[cfg(test)]
#[path = "choice_tests.rs"]
mod tests;
