//! `DirectChild`: a shell the daemon starts itself (no sandbox, or a call authorised at
//! `danger_full_access`), with `posix_spawn` and waited for through a pidfd.
//!
//! Why not `tokio::process::Command`: setting up descriptor 3 (the cwd report) and a new
//! session needs `pre_exec`, which makes the standard library `fork` the whole daemon (its
//! page tables copied, then copy-on-write faults in the daemon until the child execs); glibc's
//! `posix_spawn` does the same setup (`POSIX_SPAWN_SETSID`, `adddup2`, `addchdir_np`) from a
//! `vfork`-like clone that shares the daemon's memory until the exec. The exit is awaited on
//! a pidfd (readable once the child exits) and collected with `waitid(P_PIDFD)`, not through
//! tokio's SIGCHLD handling. Like the standard library, the child gets SIGPIPE back at its
//! default (Rust ignores it in the daemon) and no blocked signals.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::tool::trace::{TRACEPARENT_ENV, TRACESTATE_ENV};

/// A child of the daemon, reaped by [`DirectChild::wait`] or [`DirectChild::try_wait`] (or,
/// if dropped before, by a thread of its own).
#[derive(Debug)]
pub(crate) struct DirectChild {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
}

impl DirectChild {
    /// Starts `argv` (looked up on `PATH`) in `cwd` in a session of its own, with `stdio` on
    /// descriptors 0–2 and `more` on 3, 4, … (the cwd report; a spare's command pipe), in the
    /// daemon's environment without `TOOLD_*` and `CDPATH`, plus `extra` (the trace context;
    /// it replaces a variable of the same name).
    pub(crate) fn spawn(
        cwd: &Path,
        argv: &[OsString],
        stdio: [OwnedFd; 3],
        more: Vec<OwnedFd>,
        extra: &[(&str, String)],
    ) -> io::Result<DirectChild> {
        let cstring = |bytes: &[u8]| CString::new(bytes).map_err(io::Error::other);
        let args: Vec<CString> = argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let env: Vec<CString> = std::env::vars_os()
            .filter(|(key, _)| {
                let key = key.as_bytes();
                !key.starts_with(b"TOOLD_")
                    && key != b"CDPATH"
                    && key != TRACEPARENT_ENV.as_bytes()
                    && key != TRACESTATE_ENV.as_bytes()
                    && !extra.iter().any(|(name, _)| name.as_bytes() == key)
            })
            .chain(
                extra
                    .iter()
                    .map(|(name, value)| (OsString::from(name), OsString::from(value))),
            )
            .map(|(key, value)| {
                let mut pair = key.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(value.as_bytes());
                cstring(&pair)
            })
            .collect::<io::Result<_>>()?;
        let cwd = cstring(cwd.as_os_str().as_bytes())?;
        // A source below 5 could be overwritten by another dup2 before it is read; none is
        // in practice (the daemon's 0–2 are open), but a copy above makes sure.
        let sources: Vec<OwnedFd> = stdio
            .into_iter()
            .chain(more)
            .map(|fd| {
                if fd.as_raw_fd() < 5 {
                    fd.try_clone_to_owned_above()
                } else {
                    Ok(fd)
                }
            })
            .collect::<io::Result<_>>()?;
        let pid = posix_spawn(&cwd, &args, &env, &sources)?;
        // SAFETY: pidfd_open on our own unreaped child (its pid cannot be reused yet).
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if pidfd < 0 {
            let err = io::Error::last_os_error();
            reap_in_background(pid, None);
            return Err(err);
        }
        // SAFETY: pidfd_open returned a new descriptor, owned here.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        // SAFETY: the pidfd stays open and owned by the AsyncFd for its whole life.
        let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }?;
        Ok(DirectChild {
            pid,
            pidfd,
            status: None,
        })
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            let mut ready = self.pidfd.readable().await?;
            ready.clear_ready();
        }
    }

    /// Reaps the child if it exited; `Ok(None)` while it runs.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = wait_pidfd(self.pidfd.get_ref().as_raw_fd(), libc::WNOHANG)?;
        }
        Ok(self.status)
    }
}

impl Drop for DirectChild {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Whoever dropped it stopped caring; the process group is being killed (see
            // `GroupGuard`), and a thread collects the exit so no zombie stays.
            let pidfd = self.pidfd.get_ref().try_clone().ok();
            reap_in_background(self.pid, pidfd);
        }
    }
}

/// Waits for `pid` on a thread of its own (by its pidfd when there is one).
fn reap_in_background(pid: libc::pid_t, pidfd: Option<OwnedFd>) {
    std::thread::spawn(move || match pidfd {
        Some(pidfd) => {
            let _ = wait_pidfd(pidfd.as_raw_fd(), 0);
        }
        None => {
            // SAFETY: waitpid on our own child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
    });
}

/// `waitid(P_PIDFD, …, WEXITED | flags)`: the status once the child exited.
fn wait_pidfd(pidfd: RawFd, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
    // SAFETY: an all-zero siginfo is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes the siginfo it is given.
    let result = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            pidfd as libc::id_t,
            &mut info,
            libc::WEXITED | flags,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful waitid the pid and status fields are set (pid 0: still
    // running under WNOHANG).
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    // The raw wait status `ExitStatus` decodes: the code in the second byte, or the signal.
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => status | 0x80,
        _ => status,
    };
    Ok(Some(ExitStatus::from_raw(raw)))
}

/// `posix_spawnp` with a new session, default signals, `sources` on 0, 1, 2 (3, 4) and `cwd`.
fn posix_spawn(
    cwd: &CString,
    args: &[CString],
    env: &[CString],
    sources: &[OwnedFd],
) -> io::Result<libc::pid_t> {
    let check = |code: libc::c_int| {
        if code == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(code))
        }
    };
    let mut argv: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|e| e.as_ptr().cast_mut()).collect();
    envp.push(std::ptr::null_mut());
    // SAFETY: the attribute and file-action objects are initialised before use and destroyed
    // after; every pointer handed to posix_spawnp lives until it returns.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut actions))?;
        check(libc::posix_spawnattr_init(&mut attr)).inspect_err(|_| {
            libc::posix_spawn_file_actions_destroy(&mut actions);
        })?;
        let prepared = (|| {
            for (target, fd) in sources.iter().enumerate() {
                check(libc::posix_spawn_file_actions_adddup2(
                    &mut actions,
                    fd.as_raw_fd(),
                    target as libc::c_int,
                ))?;
            }
            check(libc::posix_spawn_file_actions_addchdir_np(
                &mut actions,
                cwd.as_ptr(),
            ))?;
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            check(libc::posix_spawnattr_setsigmask(&mut attr, &none))?;
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut defaults);
            libc::sigaddset(&mut defaults, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigdefault(&mut attr, &defaults))?;
            let flags = libc::POSIX_SPAWN_SETSID as libc::c_int
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            check(libc::posix_spawnattr_setflags(
                &mut attr,
                flags as libc::c_short,
            ))?;
            let mut pid: libc::pid_t = 0;
            check(libc::posix_spawnp(
                &mut pid,
                args[0].as_ptr(),
                &actions,
                &attr,
                argv.as_ptr(),
                envp.as_ptr(),
            ))?;
            Ok(pid)
        })();
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        prepared
    }
}

/// A duplicate numbered 10 or above.
trait CloneAbove {
    fn try_clone_to_owned_above(&self) -> io::Result<OwnedFd>;
}

impl CloneAbove for OwnedFd {
    fn try_clone_to_owned_above(&self) -> io::Result<OwnedFd> {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) returns a new descriptor or -1.
        let fd = unsafe { libc::fcntl(self.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor, owned here.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
