//! The sandbox `bash` runs in: the `[sandbox]` settings, what this machine can do
//! ([`detect`]), the choice made once at start ([`ShellSandbox`]), and the confinement of one
//! shell ([`Confinement`]): a bubblewrap command line ([`bwrap`]) or a Landlock ruleset
//! applied between fork and exec ([`landlock`]).
//!
//! `mode = "auto"` takes bubblewrap where it can create its namespaces, else Landlock, else
//! nothing; `"bwrap"` and `"landlock"` take only that one; `"off"` takes none. With nothing,
//! bash runs unsandboxed only if `allow_unsandboxed`; otherwise every bash call below
//! `danger_full_access` is refused. A call authorised at `danger_full_access` (it names paths
//! outside the workspace and the session's mode allows that) runs unsandboxed: the sandbox
//! enforces what was authorised, and full access is not confined. Deliberately absent:
//! spawning the process (that is [`super::process`]) and the permission a call needs (that is
//! [`super::bash`], which asks [`ShellSandbox::confines`]).

mod bwrap;
mod detect;
mod landlock;

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::tool::{PermissionLevel, ToolError};

pub(crate) use landlock::restrict_self;

/// `[sandbox]` settings (DESIGN §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Run bash unsandboxed when no sandbox can run (otherwise such calls are refused).
    pub allow_unsandboxed: bool,
    /// Whether a sandboxed shell may use the network.
    pub network: bool,
}

impl Default for SandboxSettings {
    fn default() -> SandboxSettings {
        SandboxSettings {
            mode: SandboxMode::Auto,
            allow_unsandboxed: false,
            network: false,
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

/// Which sandbox a shell ran in; reported as the result's `sandbox` metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxKind {
    Bubblewrap,
    Landlock,
    None,
}

impl SandboxKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxKind::Bubblewrap => "bwrap",
            SandboxKind::Landlock => "landlock",
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
    /// Hidden from bubblewrap sandboxes (the database, other sessions' workspaces).
    data_dir: Option<PathBuf>,
    /// Where Landlock sessions get their temporary directories.
    temp_root: PathBuf,
}

impl Default for ShellSandbox {
    /// Unsandboxed, for libraries and tests that build the shell tools without a daemon; the
    /// shell then needs `danger_full_access` for anything that is not read-only.
    fn default() -> ShellSandbox {
        ShellSandbox {
            choice: Choice::Unsandboxed,
            network: true,
            data_dir: None,
            temp_root: std::env::temp_dir().join("toold-sandbox"),
        }
    }
}

impl ShellSandbox {
    /// Chooses per `settings` from what `capability` found. `data_dir` is the daemon's data
    /// directory: hidden under bubblewrap, and home of Landlock's per-session `tmp/`.
    pub fn resolve(
        settings: &SandboxSettings,
        capability: &SandboxCapability,
        data_dir: &Path,
    ) -> ShellSandbox {
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
        let choice = match picked {
            Ok(choice) => choice,
            Err(_) if settings.allow_unsandboxed => Choice::Unsandboxed,
            Err(why) => Choice::Refused { why },
        };
        ShellSandbox {
            choice,
            network: settings.network,
            data_dir: Some(data_dir.to_owned()),
            temp_root: data_dir.join("sandbox-tmp"),
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
        match &self.choice {
            Choice::Bubblewrap => format!("bash runs in bubblewrap (network {network})"),
            Choice::Landlock { abi } => {
                format!("bash runs under landlock ABI {abi} (network {network})")
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

    /// How to confine a shell of `session_id` in `workspace`, starting in `cwd`, for a call
    /// authorised at `authorized`. The shell gets the network only if the session asked for it
    /// (`network_requested`) and the server allows it.
    pub(crate) fn confine(
        &self,
        session_id: &str,
        workspace: &Path,
        cwd: &Path,
        authorized: PermissionLevel,
        network_requested: bool,
    ) -> Result<Confinement, ToolError> {
        if authorized >= PermissionLevel::DangerFullAccess {
            return Ok(Confinement::None);
        }
        let network = self.network && network_requested;
        match &self.choice {
            Choice::Unsandboxed => Ok(Confinement::None),
            Choice::Refused { why } => Err(ToolError::Execution(format!(
                "no sandbox can confine bash on this machine ({why}); the operator can set [sandbox] allow_unsandboxed = true, or the call needs danger_full_access"
            ))),
            Choice::Bubblewrap => Ok(Confinement::Bubblewrap {
                program: BWRAP.into(),
                args: bwrap::arguments(workspace, cwd, self.data_dir.as_deref(), network),
            }),
            Choice::Landlock { abi } => {
                let temp = self.session_temp_dir(session_id);
                std::fs::create_dir_all(&temp).map_err(|err| {
                    ToolError::Execution(format!(
                        "cannot create the sandbox's temporary directory \"{}\": {err}",
                        temp.display()
                    ))
                })?;
                let ruleset = landlock::ruleset(*abi, &[workspace, &temp], network)
                    .map_err(ToolError::Execution)?;
                Ok(Confinement::Landlock { ruleset, temp })
            }
        }
    }
}

/// How one shell is confined.
#[derive(Debug)]
pub(crate) enum Confinement {
    None,
    /// Run `program args… bash …` instead of `bash …`.
    Bubblewrap {
        program: OsString,
        args: Vec<OsString>,
    },
    /// Apply `ruleset` in the child; `TMPDIR` is `temp`.
    Landlock {
        ruleset: OwnedFd,
        temp: PathBuf,
    },
}

impl Confinement {
    pub(crate) fn kind(&self) -> SandboxKind {
        match self {
            Confinement::None => SandboxKind::None,
            Confinement::Bubblewrap { .. } => SandboxKind::Bubblewrap,
            Confinement::Landlock { .. } => SandboxKind::Landlock,
        }
    }

    /// The ruleset descriptor the child applies, if any.
    pub(crate) fn landlock_fd(&self) -> Option<RawFd> {
        match self {
            Confinement::Landlock { ruleset, .. } => Some(ruleset.as_raw_fd()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capability(bwrap: bool, landlock: bool) -> SandboxCapability {
        SandboxCapability {
            bubblewrap: if bwrap {
                Ok(())
            } else {
                Err("no bwrap".into())
            },
            landlock_abi: if landlock {
                Ok(4)
            } else {
                Err("no landlock".into())
            },
        }
    }

    fn choose(mode: SandboxMode, allow: bool, bwrap: bool, landlock: bool) -> Choice {
        let settings = SandboxSettings {
            mode,
            allow_unsandboxed: allow,
            network: false,
        };
        ShellSandbox::resolve(&settings, &capability(bwrap, landlock), Path::new("/d")).choice
    }

    #[test]
    fn each_mode_picks_what_the_machine_offers_and_refuses_otherwise() {
        use SandboxMode::*;
        assert_eq!(choose(Auto, false, true, true), Choice::Bubblewrap);
        assert_eq!(
            choose(Auto, false, false, true),
            Choice::Landlock { abi: 4 }
        );
        assert!(
            matches!(choose(Auto, false, false, false), Choice::Refused { why } if why.contains("no bwrap") && why.contains("no landlock"))
        );
        assert_eq!(choose(Auto, true, false, false), Choice::Unsandboxed);
        assert_eq!(
            choose(Landlock, false, true, true),
            Choice::Landlock { abi: 4 }
        );
        assert!(matches!(
            choose(Bwrap, false, false, true),
            Choice::Refused { .. }
        ));
        assert!(matches!(
            choose(Off, false, true, true),
            Choice::Refused { .. }
        ));
        assert_eq!(choose(Off, true, true, true), Choice::Unsandboxed);
    }

    #[test]
    fn refused_calls_say_why_and_full_access_runs_unconfined() {
        let settings = SandboxSettings {
            mode: SandboxMode::Off,
            ..SandboxSettings::default()
        };
        let sandbox = ShellSandbox::resolve(&settings, &capability(true, true), Path::new("/d"));
        assert!(!sandbox.confines());
        let ws = Path::new("/w");
        let err = sandbox
            .confine("s", ws, ws, PermissionLevel::WorkspaceWrite, false)
            .unwrap_err();
        assert!(
            err.message().contains("allow_unsandboxed"),
            "{}",
            err.message()
        );
        let full = sandbox
            .confine("s", ws, ws, PermissionLevel::DangerFullAccess, false)
            .unwrap();
        assert_eq!(full.kind(), SandboxKind::None);
    }
}
