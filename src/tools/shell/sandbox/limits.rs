//! Per-session limits (`[sandbox]` `pids`, `memory_bytes`, `cpu_seconds`, `open_files`) and
//! how they are enforced: a control group per session where the daemon may create one,
//! resource limits (`setrlimit`) on each command otherwise.
//!
//! Processes and memory go to a cgroup when one can be made: cgroup v2 (a child of the
//! daemon's own cgroup with `pids` and `memory` enabled), else cgroup v1 (a child in the
//! `pids` and `memory` hierarchies). The spawner joins it before it execs, so everything the
//! session runs is counted together and a fork bomb or a memory hog meets the session's
//! limit, not the machine's. Without a cgroup they fall back to `RLIMIT_NPROC` and
//! `RLIMIT_AS` on each command: per process for memory, and per user for processes (which
//! the kernel does not enforce for root). CPU time and open files are always rlimits
//! (`RLIMIT_CPU`, `RLIMIT_NOFILE`) on each command: cgroups bound CPU bandwidth, not time.
//! Which applies is probed once at start, logged, and reported as each sandboxed result's
//! `limits` metadata. A limit of 0 means none. Cgroups are named `toold-<daemon pid>-…`;
//! those a daemon killed with SIGKILL left behind (empty) are removed by the next start's probe.
//!
//! An environment session (DESIGN §12) puts its `memory_mb` and `pids` over these, and
//! `cpus` as a bandwidth quota (`cpu.max` in v2; `cpu.cfs_quota_us` over a 100 ms
//! `cpu.cfs_period_us` in the v1 `cpu` hierarchy, when the daemon may make a cgroup there;
//! otherwise `cpus` is not applied, and rlimits have no equivalent). Whether a call went over
//! a limit is read from the cgroup's own counters ([`Exhaustion`]: `oom_kill` in
//! `memory.events` / v1 `memory.oom_control`, `max` in `pids.events`), compared before and
//! during the call: the kernel's OOM killer kills one process, a fork over `pids.max` fails
//! with EAGAIN, and the counters are the one place both are recorded per session.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The limits one command gets as rlimits, passed to the spawner on its command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChildLimits {
    pub cpu_seconds: u64,
    pub open_files: u64,
    /// `RLIMIT_NPROC`; 0 when a cgroup counts processes instead.
    pub processes: u64,
    /// `RLIMIT_AS`; 0 when a cgroup limits memory instead.
    pub address_space: u64,
}

impl ChildLimits {
    /// `cpu,open_files,processes,address_space` (the spawner's `--limits` argument).
    pub(crate) fn to_arg(self) -> String {
        format!(
            "{},{},{},{}",
            self.cpu_seconds, self.open_files, self.processes, self.address_space
        )
    }

    pub(crate) fn parse(arg: &str) -> Result<ChildLimits, String> {
        let numbers: Vec<u64> = arg
            .split(',')
            .map(|n| {
                n.parse()
                    .map_err(|_| format!("bad limit \"{n}\" in \"{arg}\""))
            })
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [cpu_seconds, open_files, processes, address_space] => Ok(ChildLimits {
                cpu_seconds,
                open_files,
                processes,
                address_space,
            }),
            _ => Err(format!("limits \"{arg}\" are not four numbers")),
        }
    }

    /// In a command's child, before exec: the rlimits that are set. Only `setrlimit` calls.
    pub(crate) fn apply(self) -> io::Result<()> {
        let pairs = [
            (libc::RLIMIT_CPU, self.cpu_seconds),
            (libc::RLIMIT_NOFILE, self.open_files),
            (libc::RLIMIT_NPROC, self.processes),
            (libc::RLIMIT_AS, self.address_space),
        ];
        for (resource, value) in pairs {
            if value == 0 {
                continue;
            }
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit reads the struct it is given.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The `[sandbox]` limits and where they are enforced.
#[derive(Clone, Debug)]
pub(crate) struct SessionLimits {
    pub(crate) backend: LimitsBackend,
    pids: u64,
    memory_bytes: u64,
    cpu_seconds: u64,
    open_files: u64,
}

impl SessionLimits {
    pub(crate) fn new(settings: &super::SandboxSettings, backend: LimitsBackend) -> SessionLimits {
        SessionLimits {
            backend,
            pids: settings.pids,
            memory_bytes: settings.memory_bytes,
            cpu_seconds: settings.cpu_seconds,
            open_files: settings.open_files,
        }
    }

    /// The session's cgroup limits: an environment's `memory_mb`, `pids` and `cpus` over
    /// `[sandbox]`'s.
    pub(crate) fn cgroup(
        &self,
        environment: Option<crate::tool::EnvironmentLimits>,
    ) -> CgroupLimits {
        let own = environment.unwrap_or_default();
        let or = |mine: u64, sandbox: u64| if mine > 0 { mine } else { sandbox };
        CgroupLimits {
            pids: or(own.pids, self.pids),
            memory_bytes: or(own.memory_mb << 20, self.memory_bytes),
            cpu_millis: own.cpu_millis,
        }
    }

    /// The rlimits each command gets: processes and memory only without a cgroup.
    pub(crate) fn child(&self, cgroup: CgroupLimits) -> ChildLimits {
        let rlimits = matches!(self.backend, LimitsBackend::Rlimits { .. });
        ChildLimits {
            cpu_seconds: self.cpu_seconds,
            open_files: self.open_files,
            processes: if rlimits { cgroup.pids } else { 0 },
            address_space: if rlimits { cgroup.memory_bytes } else { 0 },
        }
    }
}

/// Where a session's processes and memory are counted, probed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LimitsBackend {
    /// Session cgroups are made under `parent` (the daemon's own cgroup).
    CgroupV2 { parent: PathBuf },
    /// Session cgroups are made under these two (the `pids` and `memory` hierarchies), and
    /// under the `cpu` hierarchy's when the daemon may make one there.
    CgroupV1 {
        pids: PathBuf,
        memory: PathBuf,
        cpu: Option<PathBuf>,
    },
    /// No cgroup could be made (why).
    Rlimits { why: String },
}

impl LimitsBackend {
    /// Tries cgroup v2, then v1, by making (and removing) a cgroup where a session's would go.
    /// Empty session cgroups left by daemons that are gone (killed before they could remove
    /// them) are removed on the way.
    pub(crate) fn probe() -> LimitsBackend {
        let v2 = v2_parent()
            .and_then(|parent| try_make(&[&parent], &["pids.max", "memory.max"]).map(|()| parent));
        let v2_why = match v2 {
            Ok(parent) => {
                remove_stale(&parent);
                return LimitsBackend::CgroupV2 { parent };
            }
            Err(why) => why,
        };
        let v1 = v1_dir("pids").and_then(|pids| {
            let memory = v1_dir("memory")?;
            try_make(&[&pids, &memory], &["pids.max", "memory.limit_in_bytes"])
                .map(|()| (pids, memory))
        });
        match v1 {
            Ok((pids, memory)) => {
                remove_stale(&pids);
                remove_stale(&memory);
                let cpu = v1_dir("cpu")
                    .and_then(|cpu| try_make(&[&cpu], &["cpu.cfs_quota_us"]).map(|()| cpu))
                    .ok();
                if let Some(cpu) = &cpu {
                    remove_stale(cpu);
                }
                LimitsBackend::CgroupV1 { pids, memory, cpu }
            }
            Err(v1_why) => LimitsBackend::Rlimits {
                why: format!("cgroup v2: {v2_why}; cgroup v1: {v1_why}"),
            },
        }
    }

    /// The result's `limits` metadata: `cgroup v2`, `cgroup v1` or `rlimits`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            LimitsBackend::CgroupV2 { .. } => "cgroup v2",
            LimitsBackend::CgroupV1 { .. } => "cgroup v1",
            LimitsBackend::Rlimits { .. } => "rlimits",
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            LimitsBackend::CgroupV2 { parent } => {
                format!("per-session limits: cgroup v2 under {}", parent.display())
            }
            LimitsBackend::CgroupV1 { pids, memory, .. } => format!(
                "per-session limits: cgroup v1 under {} and {}",
                pids.display(),
                memory.display()
            ),
            LimitsBackend::Rlimits { why } => format!(
                "per-session limits: rlimits per command (no cgroup: {why}); processes are limited per user and not for root"
            ),
        }
    }
}

/// What a session's cgroup limits (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CgroupLimits {
    pub pids: u64,
    pub memory_bytes: u64,
    /// CPUs in thousandths: a quota of that share of each 100 ms period.
    pub cpu_millis: u64,
}

/// The period a CPU quota is counted over, in microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// How often a session's cgroup met its limits so far: compared before and after a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Exhaustion {
    /// Processes the OOM killer killed for the memory limit.
    pub oom_kills: u64,
    /// Forks refused for the process limit.
    pub pids_max: u64,
}

/// A session's cgroup: its directories and their `cgroup.procs`, opened for the spawner to
/// join between fork and exec. Removed when dropped (once empty).
#[derive(Debug)]
pub(crate) struct SessionCgroup {
    dirs: Vec<PathBuf>,
    procs: Vec<OwnedFd>,
    /// Where the counters are: `memory.events` (v2) or `memory.oom_control` (v1), and
    /// `pids.events`.
    memory_events: PathBuf,
    pids_events: PathBuf,
}

impl SessionCgroup {
    /// Makes `name` under `backend` with the session's `limits`; `None` under
    /// [`LimitsBackend::Rlimits`].
    pub(crate) fn create(
        backend: &LimitsBackend,
        name: &str,
        limits: CgroupLimits,
    ) -> io::Result<Option<SessionCgroup>> {
        let quota =
            (limits.cpu_millis > 0).then(|| (limits.cpu_millis * CPU_PERIOD_US / 1000).max(1000));
        let mut files: Vec<(PathBuf, &str, String)> = Vec::new();
        let value = |files: &mut Vec<(PathBuf, &str, String)>, dir: &PathBuf, file, n: u64| {
            if n > 0 {
                files.push((dir.clone(), file, n.to_string()));
            }
        };
        let (memory_events, pids_events, dirs) = match backend {
            LimitsBackend::Rlimits { .. } => return Ok(None),
            LimitsBackend::CgroupV2 { parent } => {
                let dir = parent.join(name);
                value(&mut files, &dir, "pids.max", limits.pids);
                value(&mut files, &dir, "memory.max", limits.memory_bytes);
                if let Some(quota) = quota
                    && parent.join("cgroup.subtree_control").exists()
                {
                    // Best effort: `cpu` may not be delegated; then `cpus` is not applied.
                    let _ = write_value(&parent.join("cgroup.subtree_control"), "+cpu");
                    files.push((dir.clone(), "cpu.max", format!("{quota} {CPU_PERIOD_US}")));
                }
                (
                    dir.join("memory.events"),
                    dir.join("pids.events"),
                    vec![dir],
                )
            }
            LimitsBackend::CgroupV1 { pids, memory, cpu } => {
                let (p, m) = (pids.join(name), memory.join(name));
                value(&mut files, &p, "pids.max", limits.pids);
                value(&mut files, &m, "memory.limit_in_bytes", limits.memory_bytes);
                let mut dirs = vec![p.clone(), m.clone()];
                if let (Some(cpu), Some(quota)) = (cpu, quota) {
                    let c = cpu.join(name);
                    files.push((c.clone(), "cpu.cfs_period_us", CPU_PERIOD_US.to_string()));
                    files.push((c.clone(), "cpu.cfs_quota_us", quota.to_string()));
                    dirs.push(c);
                }
                (m.join("memory.oom_control"), p.join("pids.events"), dirs)
            }
        };
        let mut cgroup = SessionCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory_events,
            pids_events,
        };
        for dir in dirs {
            std::fs::create_dir(&dir)?;
            cgroup.dirs.push(dir.clone());
            let procs = OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            cgroup.procs.push(procs.into());
        }
        for (dir, file, value) in files {
            match write_value(&dir.join(file), &value) {
                // A v2 `cpu.max` where `cpu` could not be enabled: not applied.
                Err(_) if file == "cpu.max" => {}
                written => written?,
            }
        }
        Ok(Some(cgroup))
    }

    /// The cgroup's counters now (0 where a file cannot be read).
    pub(crate) fn exhaustion(&self) -> Exhaustion {
        Exhaustion {
            oom_kills: counter(&self.memory_events, "oom_kill"),
            pids_max: counter(&self.pids_events, "max"),
        }
    }

    /// The `cgroup.procs` descriptors the spawner writes `0` to, joining the cgroup.
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        // Best effort: a cgroup still holding a process (dying) cannot be removed yet, so a
        // thread retries for a while rather than holding up whoever dropped the session.
        let dirs = std::mem::take(&mut self.dirs);
        std::thread::spawn(move || {
            for _ in 0..50 {
                let left: Vec<&PathBuf> = dirs
                    .iter()
                    .filter(|dir| std::fs::remove_dir(dir).is_err() && dir.exists())
                    .collect();
                if left.is_empty() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
    }
}

/// The value of `key` in a cgroup file of `key value` lines.
fn counter(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

/// In the spawner's child, before exec: joins the cgroup. Only `write` calls.
pub(crate) fn join(procs: &[RawFd]) -> io::Result<()> {
    for &fd in procs {
        // SAFETY: write(2) of a static byte to a descriptor.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn write_value(path: &Path, value: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

/// Removes the cgroups `toold-<pid>-…` under `parent` whose daemon `<pid>` no longer runs
/// (a cgroup still holding a process is not removed: `rmdir` refuses it).
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let daemon = name
            .to_str()
            .and_then(|n| n.strip_prefix("toold-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = daemon
            && pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Makes and removes a probe cgroup in each of `parents`, checking that `files` appear.
fn try_make(parents: &[&Path], files: &[&str]) -> Result<(), String> {
    let name = format!("toold-probe-{}", std::process::id());
    for (parent, file) in parents.iter().cycle().zip(files) {
        let dir = parent.join(&name);
        let made = std::fs::create_dir(&dir)
            .map_err(|err| format!("cannot create \"{}\": {err}", dir.display()));
        let found = made.and_then(|()| {
            if dir.join(file).exists() {
                Ok(())
            } else {
                Err(format!("\"{}\" has no {file}", dir.display()))
            }
        });
        let _ = std::fs::remove_dir(&dir);
        found?;
    }
    Ok(())
}

/// The daemon's cgroup v2 directory, with `pids` and `memory` enabled for its children.
fn v2_parent() -> Result<PathBuf, String> {
    let mount = mount_point(|fstype, _| fstype == "cgroup2").ok_or("no cgroup2 mount")?;
    let own = own_cgroup(|controllers| controllers.is_empty()).ok_or("no cgroup v2 entry")?;
    let parent = mount.join(own.trim_start_matches('/'));
    let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
        .map_err(|err| format!("{}: {err}", parent.display()))?;
    if !(enabled.contains("pids") && enabled.contains("memory")) {
        write_value(&parent.join("cgroup.subtree_control"), "+pids +memory").map_err(|err| {
            format!(
                "pids and memory are not delegated to {}: {err}",
                parent.display()
            )
        })?;
    }
    Ok(parent)
}

/// The daemon's directory in the cgroup v1 hierarchy of `controller`.
fn v1_dir(controller: &str) -> Result<PathBuf, String> {
    let mount = mount_point(|fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == controller)
    })
    .ok_or_else(|| format!("no cgroup v1 {controller} mount"))?;
    let own = own_cgroup(|controllers| controllers.split(',').any(|c| c == controller))
        .ok_or_else(|| format!("no cgroup v1 {controller} entry"))?;
    Ok(mount.join(own.trim_start_matches('/')))
}

/// A mount point from `/proc/self/mountinfo` whose type and super options match.
fn mount_point(matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split_whitespace();
        let fstype = right.next()?;
        let options = right.nth(1).unwrap_or("");
        let mut left = left.split_whitespace();
        // The mount's root must be the hierarchy's root, or the paths below would not match.
        let root = left.nth(3)?;
        let point = left.next()?;
        (matches(fstype, options) && root == "/").then(|| PathBuf::from(point))
    })
}

/// The daemon's cgroup path in the hierarchy whose controller list matches.
fn own_cgroup(matches: impl Fn(&str) -> bool) -> Option<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    own.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        matches(controllers).then(|| path.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_travel_as_one_argument_and_bad_ones_say_why() {
        let limits = ChildLimits {
            cpu_seconds: 60,
            open_files: 1024,
            processes: 0,
            address_space: 1 << 30,
        };
        assert_eq!(ChildLimits::parse(&limits.to_arg()), Ok(limits));
        assert!(ChildLimits::parse("1,2,3").unwrap_err().contains("four"));
        assert!(ChildLimits::parse("1,x,3,4").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn an_environments_limits_go_over_the_sandboxes_and_counters_are_read_by_key() {
        let settings = super::super::SandboxSettings::default();
        let backend = LimitsBackend::Rlimits { why: "test".into() };
        let limits = SessionLimits::new(&settings, backend);
        let own = crate::tool::EnvironmentLimits {
            memory_mb: 64,
            pids: 0,
            cpu_millis: 500,
        };
        let cgroup = limits.cgroup(Some(own));
        assert_eq!(cgroup.memory_bytes, 64 << 20);
        assert_eq!(cgroup.pids, settings.pids);
        assert_eq!(cgroup.cpu_millis, 500);
        assert_eq!(limits.cgroup(None).memory_bytes, settings.memory_bytes);
        // Under rlimits the same numbers become each command's.
        assert_eq!(limits.child(cgroup).address_space, 64 << 20);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.oom_control");
        std::fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(counter(&file, "oom_kill"), 3);
        assert_eq!(counter(&file, "max"), 0);
        assert_eq!(counter(&dir.path().join("missing"), "max"), 0);
    }
}
