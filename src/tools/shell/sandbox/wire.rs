//! The bytes between the daemon and a session's spawner ([`super::spawner`]): Unix
//! `SOCK_SEQPACKET` sockets (one message per send, so no framing), descriptors passed with
//! `SCM_RIGHTS`, and the request and reply formats both sides share.
//!
//! A request is one message on the control socket: a flags byte, a count of environment
//! variables, then NUL-terminated fields (the working directory, each variable as
//! `NAME=value`, then each argument), with the descriptors `[reply, stdin, stdout,
//! stderr, report?, command?]` (the last for a spare shell, see [`super::super::spare`]). Answers come on `reply` (a socket made for that one command): first
//! [`REPLY_STARTED`], sent by the command's own process just before it execs, so that the
//! kernel attaches its credentials (`SO_PASSCRED`) with its pid translated into the daemon's
//! pid namespace, even if it has already exited and been reaped when the daemon reads it;
//! later [`REPLY_EXITED`] from the spawner with the raw wait status; `E` and a reason when the
//! spawner could not fork it. End of file before the exit means the spawner died.
//! Deliberately absent: any state; both sides own their sockets.

use std::ffi::OsString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// The first byte of a reply: the command is about to exec (its credentials come with it).
pub(crate) const REPLY_STARTED: u8 = b'S';
/// The first byte of a reply: the command was reaped; the wait status follows as text.
pub(crate) const REPLY_EXITED: u8 = b'X';
/// Request flag: a fifth descriptor is the working-directory report (descriptor 3).
pub(crate) const FLAG_REPORT: u8 = 1;
/// Request flag: a sixth descriptor is a spare shell's command pipe (descriptor 4); only
/// with [`FLAG_REPORT`].
pub(crate) const FLAG_COMMAND: u8 = 2;
/// The most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 6;
/// Room for the largest request: a command (100 000 bytes), the wrapper and the directory.
pub(crate) const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// A connected `SOCK_SEQPACKET` pair, both ends close-on-exec.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    let result = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets or clears `O_NONBLOCK`.
pub(crate) fn set_nonblocking(fd: RawFd, nonblocking: bool) -> io::Result<()> {
    // SAFETY: fcntl on an integer descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags == -1 {
            return Err(io::Error::last_os_error());
        }
        let flags = if nonblocking {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if libc::fcntl(fd, libc::F_SETFL, flags) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sends one message with `fds` attached.
pub(crate) fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    // u64 words keep the control buffer aligned for `cmsghdr`.
    let mut control = vec![0_u64; space.div_ceil(8).max(1)];
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    if !fds.is_empty() {
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = space as _;
        // SAFETY: the control buffer has room for one header with `fds` (CMSG_SPACE above).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_bytes,
            );
        }
    }
    // SAFETY: `header` points at live buffers for the duration of the call.
    let sent = unsafe { libc::sendmsg(socket, &header, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to attach the sender's credentials to every message `socket` receives.
pub(crate) fn pass_credentials(socket: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads the integer it is given.
    let result = unsafe {
        libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message received.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Its length; 0 at end of file.
    pub len: usize,
    /// Descriptors that came with it (close-on-exec).
    pub fds: Vec<OwnedFd>,
    /// The sender's pid, in this process's pid namespace (with `SO_PASSCRED`).
    pub pid: Option<libc::pid_t>,
}

/// Receives one message into `buf`.
pub(crate) fn recv_with_fds(socket: RawFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe {
        libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32)
            + libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32)
    } as usize;
    let mut control = vec![0_u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = space as _;
    // SAFETY: as above.
    let received = unsafe { libc::recvmsg(socket, &mut header, libc::MSG_CMSG_CLOEXEC) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut message = Received {
        len: received as usize,
        ..Received::default()
    };
    // SAFETY: the kernel filled the control buffer; the CMSG_* walk stays inside it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&header);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    message.fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
            {
                let credentials = std::ptr::read_unaligned(data.cast::<libc::ucred>());
                message.pid = Some(credentials.pid).filter(|pid| *pid > 0);
            }
            cmsg = libc::CMSG_NXTHDR(&header, cmsg);
        }
    }
    if header.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::other(format!(
            "a message longer than {} bytes was cut",
            buf.len()
        )));
    }
    Ok(message)
}

/// One command for the spawner to start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub cwd: PathBuf,
    pub argv: Vec<OsString>,
    pub report: bool,
    /// Whether a spare shell's command pipe follows the report.
    pub command: bool,
    /// Set in the command's environment on top of the spawner's (the call's trace context).
    pub env: Vec<(OsString, OsString)>,
}

impl Request {
    pub(crate) fn encode(&self) -> Vec<u8> {
        // At most a few variables (the trace context); more would be a caller's bug.
        let count = u8::try_from(self.env.len()).unwrap_or(u8::MAX);
        let flags = (u8::from(self.report) * FLAG_REPORT) | (u8::from(self.command) * FLAG_COMMAND);
        let mut bytes = vec![flags, count];
        let mut push = |field: &[u8]| {
            bytes.extend_from_slice(field);
            bytes.push(0);
        };
        push(self.cwd.as_os_str().as_bytes());
        for (name, value) in self.env.iter().take(usize::from(count)) {
            push(&[name.as_bytes(), b"=", value.as_bytes()].concat());
        }
        for argument in &self.argv {
            push(argument.as_bytes());
        }
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Request, String> {
        let (&flags, rest) = bytes.split_first().ok_or("an empty request")?;
        let (&count, rest) = rest.split_first().ok_or("a request without its count")?;
        let rest = rest
            .strip_suffix(&[0])
            .ok_or("a request without its last NUL")?;
        let mut fields = rest.split(|&b| b == 0);
        let cwd = fields.next().ok_or("a request without a directory")?;
        let env = (0..count)
            .map(|_| {
                let field = fields.next().ok_or("a request missing a variable")?;
                let at = field
                    .iter()
                    .position(|&b| b == b'=')
                    .filter(|&at| at > 0)
                    .ok_or("a variable without a name")?;
                Ok((
                    OsString::from_vec(field[..at].to_vec()),
                    OsString::from_vec(field[at + 1..].to_vec()),
                ))
            })
            .collect::<Result<Vec<_>, &str>>()?;
        let argv: Vec<OsString> = fields.map(|f| OsString::from_vec(f.to_vec())).collect();
        if flags & FLAG_COMMAND != 0 && flags & FLAG_REPORT == 0 {
            return Err("a command pipe without a report descriptor".into());
        }
        if argv.is_empty() {
            return Err("a request without a program".into());
        }
        Ok(Request {
            cwd: PathBuf::from(OsString::from_vec(cwd.to_vec())),
            argv,
            report: flags & FLAG_REPORT != 0,
            command: flags & FLAG_COMMAND != 0,
            env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_request_round_trips_and_bad_ones_say_why() {
        let request = Request {
            cwd: PathBuf::from("/w/sub dir"),
            argv: vec!["bash".into(), "-c".into(), "echo 'a b'".into()],
            report: true,
            command: true,
            env: vec![("TRACEPARENT".into(), "00-a=b".into())],
        };
        assert_eq!(Request::decode(&request.encode()), Ok(request));
        assert!(
            Request::decode(b"\x02\0/w\0bash\0")
                .unwrap_err()
                .contains("report")
        );
        assert!(Request::decode(b"").is_err());
        assert!(
            Request::decode(b"\0\0/w\0")
                .unwrap_err()
                .contains("program")
        );
        assert!(
            Request::decode(b"\0\x01/w\0")
                .unwrap_err()
                .contains("variable")
        );
        assert!(
            Request::decode(b"\0\x01/w\0=x\0bash\0")
                .unwrap_err()
                .contains("name")
        );
    }

    #[test]
    fn descriptors_travel_with_a_message() {
        let (a, b) = seqpacket_pair().unwrap();
        let (read, write) = std::io::pipe().unwrap();
        pass_credentials(b.as_raw_fd()).unwrap();
        send_with_fds(a.as_raw_fd(), b"hello", &[write.as_raw_fd()]).unwrap();
        drop(write);
        let mut buf = [0_u8; 16];
        let got = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..got.len], b"hello");
        assert_eq!(got.pid, Some(std::process::id() as libc::pid_t));
        assert_eq!(got.fds.len(), 1);
        let mut write = std::fs::File::from(got.fds.into_iter().next().unwrap());
        std::io::Write::write_all(&mut write, b"x").unwrap();
        drop(write);
        let mut got = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(OwnedFd::from(read)), &mut got)
            .unwrap();
        assert_eq!(got, "x");
    }
}
