//! The spawner itself: `toold sandbox-spawner`, one per session, started inside the session's
//! sandbox (under bubblewrap, or with the Landlock ruleset already applied), forking each
//! command on request.
//!
//! One thread, no runtime: it `poll`s the control socket and a signalfd (SIGCHLD, and SIGTERM,
//! which the daemon's death sends it through `PR_SET_PDEATHSIG`). A request
//! ([`super::super::wire::Request`]) comes with its descriptors; the spawner forks, the child
//! takes a session of its own (`setsid`, so the daemon stops its whole group), asks to die
//! with the spawner (`PR_SET_PDEATHSIG`), takes the session's rlimits, puts the descriptors on
//! 0–3, enters the directory, says it is starting on the request's reply socket (the kernel
//! attaches its pid for the daemon) and execs. Once the spawner reaped the command it sends
//! the wait status on the same socket. If the daemon hangs up on a reply socket before that
//! (a call dropped before it learnt the pid, so it cannot stop the command itself), the
//! spawner kills the command's group.
//!
//! Nothing a command leaves behind outlives it unnoticed: the spawner is a child subreaper,
//! so a process orphaned by its command (`cmd &`, `setsid cmd &`, a double fork) becomes its
//! child, and whenever a command ends every such child not in the session of a command still
//! running (a background shell) is killed with its process group before the exit is reported.
//! So the next call sees only background shells. At end of file on the control socket (the
//! session closed, the daemon died) or on SIGTERM it kills every command's group and every
//! child, and exits. Being single-threaded, it may allocate between fork and exec; the child
//! still only makes system calls.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::super::limits::ChildLimits;
use super::super::wire::{self, REPLY_EXITED, REPLY_STARTED, Request};

/// A command the spawner started and has not reaped: where its exit goes.
struct Running {
    reply: OwnedFd,
    /// The daemon closed the reply socket before the command ended (the call was dropped
    /// before it learnt the pid, so nobody else can stop it): its group was killed.
    abandoned: bool,
}

/// An environment's Landlock tier (`--chroot`): each command changes its root to the
/// environment's, gives up every capability and is confined by a Landlock ruleset that lets
/// it read beneath `root` only and write beneath `writable` only.
#[derive(Debug)]
pub struct Chroot {
    pub root: PathBuf,
    pub writable: Vec<PathBuf>,
    /// `network = "host"`: TCP is not restricted.
    pub network: bool,
}

/// What each command of an environment's Landlock tier enters, prepared once.
struct Confined {
    root: CString,
    /// The ruleset, close-on-exec, at a number ≥ [`CONFINED_FD_FLOOR`] (a command's
    /// descriptors are put on 0–4 before it is applied).
    ruleset: OwnedFd,
}

/// Where the ruleset descriptor is moved to, out of the way of 0–4.
const CONFINED_FD_FLOOR: RawFd = 10;

/// `toold sandbox-spawner --control-fd N --limits L [--chroot ROOT …]`: serves until the
/// control socket ends.
pub fn run(control_fd: RawFd, limits: &str, chroot: Option<Chroot>) -> io::Result<()> {
    let limits = ChildLimits::parse(limits).map_err(io::Error::other)?;
    let confined = chroot.map(confine).transpose()?;
    serve(control_fd, limits, confined.as_ref())
}

/// Builds the ruleset of `chroot` (here, where allocating is fine: before any fork).
fn confine(chroot: Chroot) -> io::Result<Confined> {
    let abi = super::super::detect::landlock_abi().map_err(io::Error::other)?;
    let writable: Vec<&Path> = chroot.writable.iter().map(PathBuf::as_path).collect();
    let built = super::super::landlock::ruleset(
        abi,
        std::slice::from_ref(&chroot.root),
        &writable,
        chroot.network,
    )
    .map_err(io::Error::other)?;
    // SAFETY: fcntl duplicates a descriptor this process owns; the copy is owned below.
    let moved = unsafe { libc::fcntl(built.as_raw_fd(), libc::F_DUPFD_CLOEXEC, CONFINED_FD_FLOOR) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Confined {
        root: CString::new(chroot.root.as_os_str().as_bytes()).map_err(io::Error::other)?,
        // SAFETY: `moved` is a fresh descriptor nothing else owns.
        ruleset: unsafe { OwnedFd::from_raw_fd(moved) },
    })
}

/// `toold sandbox-spawner … --kill-group G`: kills process group `G` (in a gVisor sandbox,
/// where the daemon's signals do not reach; `runsc kill` signals single processes only).
pub fn kill_group(group: i32) -> io::Result<()> {
    if group <= 1 {
        return Err(io::Error::other(format!(
            "no process group {group} to kill"
        )));
    }
    // SAFETY: kill on integers.
    if unsafe { libc::kill(-group, libc::SIGKILL) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Serves requests on `control` until it ends; each command gets `limits`.
fn serve(control: RawFd, limits: ChildLimits, confined: Option<&Confined>) -> io::Result<()> {
    // SAFETY: the daemon handed this descriptor over for this purpose; nothing else owns it.
    let control = unsafe { OwnedFd::from_raw_fd(control) };
    // SAFETY: fcntl and prctl on integers. Close-on-exec, so no command inherits the
    // session's control socket; a subreaper, so orphans come here.
    unsafe {
        libc::fcntl(control.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
    let signals = signal_fd()?;
    let mut running: HashMap<libc::pid_t, Running> = HashMap::new();
    let mut buf = vec![0_u8; wire::MAX_REQUEST_BYTES];
    loop {
        // The control socket and the signals; then each command's reply socket, watched for
        // the daemon hanging up on it.
        let watched: Vec<libc::pid_t> = running
            .iter()
            .filter(|(_, r)| !r.abandoned)
            .map(|(pid, _)| *pid)
            .collect();
        let mut polled: Vec<libc::pollfd> = [control.as_raw_fd(), signals.as_raw_fd()]
            .into_iter()
            .map(|fd| (fd, libc::POLLIN))
            .chain(
                watched
                    .iter()
                    .map(|pid| (running[pid].reply.as_raw_fd(), 0)),
            )
            .map(|(fd, events)| libc::pollfd {
                fd,
                events,
                revents: 0,
            })
            .collect();
        // SAFETY: poll reads and writes the array it is given.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as _, -1) };
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if polled[1].revents != 0 && drain_signals(&signals) {
            break;
        }
        for (pid, entry) in watched.iter().zip(&polled[2..]) {
            if entry.revents & (libc::POLLHUP | libc::POLLERR) != 0
                && let Some(command) = running.get_mut(pid)
            {
                command.abandoned = true;
                // The process itself too: it may not have made its own group yet.
                // SAFETY: kill(2) on the command and its process group.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
        reap(&mut running);
        if polled[0].revents != 0 {
            match wire::recv_with_fds(control.as_raw_fd(), &mut buf) {
                Ok(got) if got.len == 0 => break,
                Ok(got) => start(&buf[..got.len], got.fds, (limits, confined), &mut running),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    // The session is over: nothing it started may outlive it.
    for pid in running.keys() {
        // SAFETY: kill(2) on a process group id.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    running.clear();
    sweep_until_none_left();
    Ok(())
}

/// SIGCHLD and SIGTERM, blocked and read from a descriptor instead.
fn signal_fd() -> io::Result<OwnedFd> {
    // SAFETY: sigset operations on a local set; sigprocmask and signalfd read it.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::sigaddset(&mut mask, libc::SIGCHLD);
        libc::sigaddset(&mut mask, libc::SIGTERM);
        if libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Reads the pending signals; whether SIGTERM was among them.
fn drain_signals(signals: &OwnedFd) -> bool {
    let mut terminate = false;
    loop {
        // SAFETY: an all-zero siginfo is valid; read fills it.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: read into the struct, at most its size.
        let read = unsafe { libc::read(signals.as_raw_fd(), (&raw mut info).cast(), size) };
        if read != size as isize {
            return terminate;
        }
        terminate |= info.ssi_signo == libc::SIGTERM as u32;
    }
}

/// Reaps every child that ended; for a command, clears away its orphans and reports its exit.
fn reap(running: &mut HashMap<libc::pid_t, Running>) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status integer.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if let Some(done) = running.remove(&pid) {
            sweep_orphans(running);
            let message = format!("{}{status}", REPLY_EXITED as char);
            // The daemon may have stopped listening (a dropped call); nothing to do then.
            let _ = wire::send_with_fds(done.reply.as_raw_fd(), message.as_bytes(), &[]);
        }
    }
}

/// Kills every child of the spawner (and its process group) that is not a running command
/// nor in the session of one: processes orphaned by commands that ended.
/// At the end: kills every child and reaps it, sweeping again after each reap, until none is
/// left or [`FINAL_SWEEP`] has passed. One sweep is not enough: a process orphaned by one
/// just killed (`setsid -f cmd`) becomes this subreaper's child only when its parent exits,
/// which can be after a sweep (a `sleep 30` outlived a daemon's `kill -9` so); once a killed
/// child is reaped, its own children are this process's already.
fn sweep_until_none_left() {
    let deadline = std::time::Instant::now() + FINAL_SWEEP;
    loop {
        sweep_orphans(&HashMap::new());
        let mut status = 0;
        // SAFETY: waitpid on any child, without blocking.
        let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if reaped < 0 || std::time::Instant::now() >= deadline {
            // ECHILD: nothing is left.
            return;
        }
        if reaped == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// How long the final sweep may take (every child has been sent SIGKILL).
const FINAL_SWEEP: std::time::Duration = std::time::Duration::from_secs(2);

fn sweep_orphans(running: &HashMap<libc::pid_t, Running>) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let Ok(children) = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) else {
        return;
    };
    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
        if running.contains_key(&child) {
            continue;
        }
        let (group, session) = group_and_session(child).unwrap_or((child, child));
        if running.contains_key(&session) {
            continue;
        }
        // SAFETY: kill(2) on integers.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
            libc::kill(child, libc::SIGKILL);
        }
    }
}

/// A process's group and session ids (fields 5 and 6 of `/proc/PID/stat`).
fn group_and_session(pid: libc::pid_t) -> Option<(libc::pid_t, libc::pid_t)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(2);
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((group, session))
}

/// Starts one request; a request that cannot start is answered with an error on its reply
/// socket, or dropped (closing the reply socket) when it has none.
fn start(
    bytes: &[u8],
    fds: Vec<OwnedFd>,
    (limits, confined): (ChildLimits, Option<&Confined>),
    running: &mut HashMap<libc::pid_t, Running>,
) {
    let Some(reply) = fds.first() else { return };
    let reply = reply.as_raw_fd();
    let result = Request::decode(bytes)
        .map_err(io::Error::other)
        .and_then(|request| fork_command(&request, &fds, limits, confined));
    match result {
        Ok(pid) => {
            if let Some(reply) = fds.into_iter().next() {
                running.insert(
                    pid,
                    Running {
                        reply,
                        abandoned: false,
                    },
                );
            }
        }
        Err(err) => {
            let _ = wire::send_with_fds(reply, format!("E{err}").as_bytes(), &[]);
        }
    }
}

/// Forks the command with `fds` = `[reply, stdin, stdout, stderr, report?, command?]`.
fn fork_command(
    request: &Request,
    fds: &[OwnedFd],
    limits: ChildLimits,
    confined: Option<&Confined>,
) -> io::Result<libc::pid_t> {
    let wanted = 4 + usize::from(request.report) + usize::from(request.command);
    if fds.len() != wanted {
        return Err(io::Error::other(format!(
            "a request came with {} descriptors, not {wanted}",
            fds.len()
        )));
    }
    let cstring = |bytes: &[u8]| CString::new(bytes).map_err(io::Error::other);
    let argv: Vec<CString> = request
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let command = Command {
        spawner: std::process::id() as libc::pid_t,
        reply: fds[0].as_raw_fd(),
        targets: fds[1..]
            .iter()
            .enumerate()
            .map(|(target, fd)| (fd.as_raw_fd(), target as RawFd))
            .collect(),
        cwd: cstring(request.cwd.as_os_str().as_bytes())?,
        argv: argv_ptrs,
        env: request
            .env
            .iter()
            .map(|(name, value)| cstring(&[name.as_bytes(), b"=", value.as_bytes()].concat()))
            .collect::<io::Result<_>>()?,
        limits,
        confined: confined.map(|c| (c.root.as_ptr(), c.ruleset.as_raw_fd())),
    };
    // SAFETY: this process has one thread, so the child may do anything; it only makes
    // system calls on data prepared above and ends in exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        command.exec();
    }
    Ok(pid)
}

/// What the child between fork and exec needs, prepared before the fork.
struct Command {
    spawner: libc::pid_t,
    reply: RawFd,
    /// Descriptors and the numbers they take (0, 1, 2, 3, 4).
    targets: Vec<(RawFd, RawFd)>,
    cwd: CString,
    argv: Vec<*const libc::c_char>,
    /// `NAME=value`, added to the spawner's environment for this command.
    env: Vec<CString>,
    limits: ChildLimits,
    /// The environment's root and the Landlock ruleset (the Landlock tier).
    confined: Option<(*const libc::c_char, RawFd)>,
}

impl Command {
    /// In the child: never returns.
    fn exec(&self) -> ! {
        // SAFETY: plain system calls on prepared data; the child ends in execvp or _exit.
        unsafe {
            // The spawner blocks SIGCHLD and SIGTERM for its signalfd; a command gets neither
            // blocked (the mask survives exec).
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Rust ignores SIGPIPE, and an ignored signal stays ignored across exec; a
            // command gets the default (`yes | head` ends).
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::setsid();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != self.spawner {
                libc::_exit(126);
            }
            for &(fd, target) in &self.targets {
                if libc::dup2(fd, target) < 0 {
                    libc::_exit(126);
                }
            }
            if self.limits.apply().is_err() {
                fail(b"toold sandbox: cannot set the session's limits\n", 126);
            }
            if let Some((root, _)) = self.confined
                && libc::chroot(root) != 0
            {
                fail(b"toold sandbox: cannot enter the environment's root\n", 126);
            }
            if libc::chdir(self.cwd.as_ptr()) != 0 {
                fail(b"toold sandbox: cannot enter the working directory\n", 126);
            }
            if let Some((_, ruleset)) = self.confined
                && (drop_capabilities().is_err()
                    || super::super::landlock::restrict_self(ruleset).is_err())
            {
                fail(b"toold sandbox: cannot confine the command\n", 126);
            }
            // Sent by this process, so the kernel attaches its pid for the daemon.
            // This copy of the environment is the child's own (one thread, forked); putenv
            // keeps the pointers, which live until exec.
            for variable in &self.env {
                libc::putenv(variable.as_ptr().cast_mut());
            }
            let started = [REPLY_STARTED];
            libc::send(self.reply, started.as_ptr().cast(), 1, libc::MSG_NOSIGNAL);
            libc::execvp(self.argv[0], self.argv.as_ptr());
            fail(b"toold sandbox: cannot run bash\n", 127)
        }
    }
}

/// Gives up every capability for good: the bounding set emptied (where this process may:
/// `CAP_SETPCAP`), the ambient set cleared, then the effective, permitted and inheritable
/// sets. An exec then gains none even as uid 0, since `restrict_self` sets no-new-privs
/// after this (the kernel keeps an exec's permitted set within the one before it). Plain
/// system calls only (between fork and exec).
fn drop_capabilities() -> io::Result<()> {
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: prctl and capset on integers and on structs that live through the call.
    unsafe {
        // Every number a kernel may know; past its last one prctl says EINVAL.
        for capability in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) != 0
                && !matches!(*libc::__errno_location(), libc::EINVAL | libc::EPERM)
            {
                return Err(io::Error::last_os_error());
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Says why on the command's stderr (descriptor 2) and exits.
fn fail(message: &[u8], code: libc::c_int) -> ! {
    // SAFETY: write and _exit take plain arguments.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::_exit(code)
    }
}
