//! A warm spare: each session's next foreground `bash` already started, waiting for its
//! command, so that a call only hands the command over and reads the output.
//!
//! Why: starting bash (exec, dynamic linking, its initialisation) is about 1.3 ms of a
//! 2 ms call, on the call's critical path, and no trimming of the daemon's side removes it.
//! So when a session's foreground call starts (its first included), the next call's shell
//! is started beside it ([`SpareSet::refill`]): by the daemon (`posix_spawn`, unsandboxed or
//! `danger_full_access`) or by the session's spawner inside its sandbox, exactly as a fresh
//! shell is (a session of its own, the same environment, directory, limits, stdin
//! `/dev/null`, stdout and stderr on one fresh pipe, the cwd report on descriptor 3), plus
//! one more pipe on descriptor 4 that it reads its command from. Its cost: one idle bash per
//! session that used the shell (a few MB of memory, one process of the session's `pids`).
//!
//! The spare runs [`SPARE_WRAPPER`] instead of [`super::process`]'s wrapper: it sources
//! descriptor 4 to the end of file (so nothing runs before the daemon closes its end), which
//! sets the command (and exports the call's trace context, which is per call), closes 4, and
//! from there on is line for line the fresh wrapper (same `$0`, `$#`, `$_`, `$LINENO`, the
//! command `eval`ed with 3 closed, the final directory reported on 3). What a command can
//! tell apart: the wrapper text in `BASH_EXECUTION_STRING`, and `declare -p` listing
//! `BASH_ARGC` (a lazily made variable; its value is the same) before anything read it.
//!
//! A spare is used only for what it was started with ([`Key`]): the same directory and the
//! same confinement (unsandboxed, or this very spawner: a new spawner, so new limits or
//! sandbox, means a new spare). The environment is the daemon's, fixed at start, but for the
//! trace context, which travels with the command. A spare that does not match, died, or
//! cannot take the command whole in its pipe (a command longer than the pipe can be grown
//! to) is not used: the call starts fresh, the mismatched spare is killed, and a new one is
//! started. At most one spare per session; never shared (keyed by session id). It dies with
//! the session ([`SpareSet::discard`] on close; a session dropped without closing loses it
//! at the next refill of any session), and with the daemon: the daemon holds the only
//! writing end of its command pipe, so its death is an end of file, on which the spare
//! exits without running anything (`posix_spawn` cannot set a parent-death signal, and one
//! would follow the spawning runtime thread, not the daemon); inside a sandbox the spawner's
//! parent-death signal kills it too. A spare dropped anywhere (a call dropped while taking
//! it) has its process group killed.
//!
//! Background shells (`run_in_background`) start fresh: they need a stdin pipe and no
//! directory report, and are rare enough that a second kind of spare would not pay.
//!
//! Seen from outside, a spare's command line is the spare wrapper, not the command (a
//! fresh shell has the command as an argument). A call racing its session's close may
//! leave a spare in a slot made anew; like a session dropped without closing, it goes at
//! the next refill once the session's state is dropped.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::direct::DirectChild;
use super::group::{GroupGuard, KILL_WAIT, Leader, signal_group};
use super::process::{SharedOutput, ShellProcess, Stdin};
use super::sandbox::Confinement;
use super::sandbox::spawner::{Owner, SessionSpawner};
use super::spill::SpillWriter;
use crate::tool::{SessionView, trace};

/// Sources descriptor 4 to its end (the command and the call's environment), then runs the
/// command as the fresh wrapper does, from the same line on. No command (the daemon went):
/// exit without running anything.
pub(crate) const SPARE_WRAPPER: &str = ". /dev/fd/4\nexec 4<&-; [ \"${__toold_command+set}\" ] || exit 125; set --\neval \"$__toold_command\" 3>&-\n__toold_status=$?\nbuiltin pwd -P 2>/dev/null >&3\nexit \"$__toold_status\"\n";

/// What a spare was started with; it serves only a call that matches.
#[derive(Debug)]
struct Key {
    cwd: PathBuf,
    /// `None`: started by the daemon.
    spawner: Option<Arc<SessionSpawner>>,
}

impl Key {
    fn new(cwd: &Path, confinement: &Confinement) -> Key {
        Key {
            cwd: cwd.to_owned(),
            spawner: match confinement {
                Confinement::None => None,
                Confinement::Spawner(spawner) => Some(spawner.clone()),
            },
        }
    }

    fn matches(&self, cwd: &Path, confinement: &Confinement) -> bool {
        self.cwd == cwd
            && match (&self.spawner, confinement) {
                (None, Confinement::None) => true,
                (Some(ours), Confinement::Spawner(theirs)) => Arc::ptr_eq(ours, theirs),
                _ => false,
            }
    }
}

/// A started shell waiting for its command.
#[derive(Debug)]
pub(crate) struct Spare {
    /// Armed: the group is killed when the spare is dropped unused. First, so that it is
    /// dropped first: killed before its command pipe closes, a spare never runs a script
    /// that was cut short.
    guard: GroupGuard,
    key: Key,
    leader: Leader,
    out: io::PipeReader,
    report: io::PipeReader,
    command: io::PipeWriter,
}

impl Spare {
    /// Starts a spare in `cwd`, confined as `confinement` says.
    async fn start(cwd: &Path, confinement: &Confinement) -> io::Result<Spare> {
        // An environment's shell may be a plain `sh`, which the spare's wrapper is not for.
        if let Confinement::Spawner(spawner) = confinement
            && spawner.environment().is_some()
        {
            return Err(io::Error::other("no spare shell in an environment"));
        }
        let (out, out_write) = io::pipe()?;
        let err_write = out_write.try_clone()?;
        let (report, report_write) = io::pipe()?;
        let (command_read, command) = io::pipe()?;
        let stdin: OwnedFd = std::fs::File::open("/dev/null")?.into();
        let argv: Vec<OsString> = vec![
            "bash".into(),
            "-c".into(),
            SPARE_WRAPPER.into(),
            "bash".into(),
        ];
        let stdio = [stdin, out_write.into(), err_write.into()];
        let more = vec![OwnedFd::from(report_write), OwnedFd::from(command_read)];
        let leader = match confinement {
            Confinement::Spawner(spawner) => spawner
                .run(cwd, argv, stdio, more, &[])
                .await
                .map(Leader::Spawned)?,
            Confinement::None => {
                DirectChild::spawn(cwd, &argv, stdio, more, &[]).map(Leader::Direct)?
            }
        };
        let guard = GroupGuard {
            pgid: leader.pid(),
            armed: true,
        };
        Ok(Spare {
            guard,
            key: Key::new(cwd, confinement),
            leader,
            out,
            report,
            command,
        })
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.leader.pid()
    }

    /// Kills the spare and waits (up to [`KILL_WAIT`]) until it is reaped.
    async fn kill(mut self) {
        signal_group(self.guard.pgid, libc::SIGKILL);
        if tokio::time::timeout(KILL_WAIT, self.leader.wait())
            .await
            .is_ok_and(|waited| waited.is_ok())
        {
            // Reaped: its group id is free for reuse and must not be signalled again.
            self.guard.armed = false;
        }
    }

    /// Whether the whole of `script` fits in the command pipe (growing it if need be).
    fn fits(&self, script: &[u8]) -> bool {
        let fd = self.command.as_raw_fd();
        // SAFETY: fcntl on an integer descriptor.
        let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
        if usize::try_from(size).is_ok_and(|size| size >= script.len()) {
            return true;
        }
        let wanted = libc::c_int::try_from(script.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: as above; the kernel rounds up, or refuses past pipe-max-size.
        let size = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, wanted) };
        usize::try_from(size).is_ok_and(|size| size >= script.len())
    }
}

/// The text the spare sources: the call's variables, then the command, single-quoted.
fn script(command: &str, env: &[(&str, String)]) -> Vec<u8> {
    let quoted = |value: &str| format!("'{}'", value.replace('\'', r"'\''"));
    let mut text = String::with_capacity(command.len() + 64);
    for (name, value) in env {
        text.push_str(&format!("export {name}={}\n", quoted(value)));
    }
    text.push_str(&format!("__toold_command={}\n", quoted(command)));
    text.into_bytes()
}

/// Hands `command` to `spare`: the whole script written into its pipe, the process
/// assembled around it, then the pipe closed (which starts the command). `Err` with the
/// spare back when it cannot take this command (too long for its pipe), `Err(None)` when it
/// is dead or failed (it is killed then); the command has not run either way.
fn hand_over(
    mut spare: Spare,
    command: &str,
    env: &[(&str, String)],
    output: SharedOutput,
    spill: &mut Option<SpillWriter>,
) -> Result<io::Result<ShellProcess>, Option<Spare>> {
    if !matches!(spare.leader.try_wait(), Ok(None)) {
        return Err(None);
    }
    let script = script(command, env);
    if !spare.fits(&script) {
        return Err(Some(spare));
    }
    // Into an empty pipe with room for all of it: never blocks, never short; if it is
    // short anyway, the spare (still reading to the end of file) is killed unrun.
    if set_nonblocking(&spare.command).is_err()
        || !matches!(spare.command.write(&script), Ok(n) if n == script.len())
    {
        return Err(None);
    }
    let Spare {
        leader,
        out,
        report,
        command,
        mut guard,
        ..
    } = spare;
    // From here the process's own guard stands for the group.
    guard.armed = false;
    let process = ShellProcess::assemble(leader, out, Some(report), None, output, spill.take());
    // The end of file: the spare sources what it was sent and runs the command.
    drop(command);
    Ok(process)
}

fn set_nonblocking(pipe: &io::PipeWriter) -> io::Result<()> {
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on an integer descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags == -1 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The session's spare, and whether one is being started.
#[derive(Debug)]
struct Slot {
    owner: Owner,
    spare: Option<Spare>,
    /// What the spare being started was asked for.
    filling: Option<Key>,
    /// What a call asked for while another one was being started.
    next: Option<Key>,
}

/// The spares of every session, at most one each.
#[derive(Debug, Default)]
pub(crate) struct SpareSet {
    sessions: Mutex<HashMap<String, Slot>>,
}

impl SpareSet {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // Each critical section is a single take or put; a panic cannot leave it half-done.
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops the slots of sessions that are gone (dropped without closing); their spares
    /// are killed with them.
    fn forget_gone(sessions: &mut HashMap<String, Slot>) -> Vec<Spare> {
        let mut gone = Vec::new();
        sessions.retain(|_, slot| {
            let alive = slot.owner.as_ref().is_none_or(|o| o.strong_count() > 0);
            if !alive {
                gone.extend(slot.spare.take());
            }
            alive
        });
        gone
    }

    /// The session's spare if it matches `cwd` and `confinement`; one that does not is
    /// killed (the refill after this call starts the right one).
    fn take(&self, session_id: &str, cwd: &Path, confinement: &Confinement) -> Option<Spare> {
        let spare = self.lock().get_mut(session_id)?.spare.take()?;
        if spare.key.matches(cwd, confinement) {
            Some(spare)
        } else {
            drop(spare);
            None
        }
    }

    /// Puts an unused spare back, unless the session got another meanwhile or is gone.
    fn put_back(&self, session_id: &str, spare: Spare) {
        let mut sessions = self.lock();
        if let Some(slot) = sessions.get_mut(session_id)
            && slot.spare.is_none()
        {
            slot.spare = Some(spare);
        }
    }

    /// Starts, in the background, a spare for the session's next call in `cwd` confined as
    /// `confinement`, unless it has one that matches or one is being started for that. A
    /// spare that does not match is replaced; one being started for something else is
    /// followed by this one.
    pub(crate) fn refill(
        self: &Arc<Self>,
        session: &Arc<dyn SessionView>,
        cwd: &Path,
        confinement: &Confinement,
    ) {
        let session_id = session.id().to_owned();
        let (gone, stale) = {
            let mut sessions = self.lock();
            let gone = SpareSet::forget_gone(&mut sessions);
            let slot = sessions.entry(session_id.clone()).or_insert_with(|| Slot {
                owner: Some(Arc::downgrade(session)),
                spare: None,
                filling: None,
                next: None,
            });
            if let Some(filling) = &slot.filling {
                if !filling.matches(cwd, confinement) {
                    slot.next = Some(Key::new(cwd, confinement));
                }
                return;
            }
            if slot
                .spare
                .as_ref()
                .is_some_and(|spare| spare.key.matches(cwd, confinement))
            {
                return;
            }
            slot.filling = Some(Key::new(cwd, confinement));
            (gone, slot.spare.take())
        };
        drop((gone, stale));
        let spares = self.clone();
        let mut cwd = cwd.to_owned();
        let mut confinement = confinement.clone();
        tokio::spawn(async move {
            loop {
                let started = Spare::start(&cwd, &confinement).await;
                let mut sessions = spares.lock();
                // Closed meanwhile (its slot removed, perhaps made anew by a later call): the
                // new spare is not this slot's to fill, and dies unused.
                let Some(slot) = sessions
                    .get_mut(&session_id)
                    .filter(|slot| slot.filling.is_some())
                else {
                    return;
                };
                if let Some(next) = slot.next.take() {
                    // A later call asked for another one: start that instead.
                    cwd.clone_from(&next.cwd);
                    confinement = match &next.spawner {
                        None => Confinement::None,
                        Some(spawner) => Confinement::Spawner(spawner.clone()),
                    };
                    slot.filling = Some(next);
                    drop(sessions);
                    drop(started);
                    continue;
                }
                slot.filling = None;
                if let Ok(spare) = started {
                    // A failed start is not retried here; the next call starts fresh and
                    // tries again.
                    let replaced = slot.spare.replace(spare);
                    drop(sessions);
                    drop(replaced);
                }
                return;
            }
        });
    }

    /// Ends the session's spare (the session closes); returns once it is reaped.
    pub(crate) async fn discard(&self, session_id: &str) {
        let spare = self.lock().remove(session_id).and_then(|slot| slot.spare);
        if let Some(spare) = spare {
            spare.kill().await;
        }
    }

    /// The pid of the session's spare, when it has one ready.
    pub(crate) fn pid(&self, session_id: &str) -> Option<u32> {
        let sessions = self.lock();
        let spare = sessions.get(session_id)?.spare.as_ref()?;
        u32::try_from(spare.pid()).ok()
    }
}

/// Starts a foreground `bash` call's shell for `session` in `cwd`: on the session's spare
/// when it matches, else fresh; either way a spare for the next call is started beside it.
/// The arguments are [`ShellProcess::spawn`]'s (the directory reported, stdin `/dev/null`).
pub(crate) async fn start_foreground(
    spares: &Arc<SpareSet>,
    session: &Arc<dyn SessionView>,
    command: &str,
    cwd: &Path,
    output: SharedOutput,
    mut spill: Option<SpillWriter>,
    confinement: &Confinement,
) -> io::Result<ShellProcess> {
    let handed = spares
        .take(session.id(), cwd, confinement)
        .and_then(|spare| {
            let started = std::time::Instant::now();
            let backend = confinement.kind().as_str();
            let span = super::process::process_span(backend, true);
            span.record("process.pid", spare.pid());
            // Read inside the span: the shell's context names it.
            let env = span.in_scope(|| {
                trace::current()
                    .map(|context| context.environment())
                    .unwrap_or_default()
            });
            match hand_over(spare, command, &env, output.clone(), &mut spill) {
                Ok(process) => {
                    crate::telemetry::record_sandbox_spawn(backend, started.elapsed());
                    Some(process)
                }
                Err(back) => {
                    if let Some(spare) = back {
                        spares.put_back(session.id(), spare);
                    }
                    None
                }
            }
        });
    let process = match handed {
        Some(process) => process,
        None => {
            ShellProcess::spawn(command, cwd, output, spill, true, confinement, Stdin::Null).await
        }
    };
    if process.is_ok() {
        spares.refill(session, cwd, confinement);
    }
    process
}
