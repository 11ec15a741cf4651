//! Command hooks: `/bin/sh -c COMMAND` with the hook event's JSON on stdin, in the session's
//! workspace, with a clean environment, a timeout and an output cap.
//!
//! The environment is only [`KEPT_VARIABLES`] taken from the daemon's (captured once, at
//! start, by [`clean_environment`]), so no token, database URL or other secret of the daemon
//! reaches a hook, plus the call's trace context (`TRACEPARENT`, `TRACESTATE`); `PATH` falls back to a standard list when the daemon has none. The hook
//! runs in a process group of its own: on timeout (or a stdout/stderr over
//! [`MAX_HOOK_OUTPUT_BYTES`]) the whole group is killed, and whatever it left running when it
//! exited is killed too. Deliberately absent: what the output means (that is
//! [`super::runner`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::reply::{HookReply, MAX_HOOK_OUTPUT_BYTES};
use crate::tool::trace;

/// The daemon's environment variables a command hook sees; nothing else is passed.
pub const KEPT_VARIABLES: [&str; 9] = [
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
];
/// `PATH` when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment command hooks get, from the daemon's as `lookup` reads it.
pub fn clean_environment(lookup: impl Fn(&str) -> Option<String>) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = KEPT_VARIABLES
        .iter()
        .filter_map(|name| lookup(name).map(|value| ((*name).into(), value.into())))
        .collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env
}

pub(crate) struct CommandHook {
    command: String,
    env: Arc<Vec<(OsString, OsString)>>,
}

/// Why reading a hook's output stopped early.
enum ReadFailure {
    Io(std::io::Error),
    OverCap(&'static str),
}

impl CommandHook {
    pub(crate) fn new(command: String, env: Arc<Vec<(OsString, OsString)>>) -> CommandHook {
        CommandHook { command, env }
    }

    /// Runs the hook on `input` in `cwd`.
    pub(crate) async fn run(&self, input: &[u8], cwd: &Path, timeout: Duration) -> HookReply {
        let mut child = match Command::new("/bin/sh")
            .arg("-c")
            .arg(&self.command)
            .env_clear()
            .envs(self.env.iter().cloned())
            // The hook's span (or the request's context when spans are not exported).
            .envs(
                trace::current()
                    .map(|c| c.environment())
                    .unwrap_or_default(),
            )
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(err) => return HookReply::Failed(format!("could not start: {err}")),
        };
        let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(pgid);
            return HookReply::Failed("its pipes could not be opened".into());
        };
        let input = input.to_vec();
        let write = async move {
            // A hook that does not read its stdin closes the pipe: that is its business.
            let _ = stdin.write_all(&input).await;
            drop(stdin);
            Ok::<(), ReadFailure>(())
        };
        let run = async {
            let ((), out, err) = tokio::try_join!(
                write,
                read_capped(stdout, "stdout"),
                read_capped(stderr, "stderr")
            )?;
            let status = child.wait().await.map_err(ReadFailure::Io)?;
            Ok::<_, ReadFailure>((status, out, err))
        };
        let finished = tokio::time::timeout(timeout, run).await;
        // Whatever is left of the group goes: on timeout the hook itself, after an exit what
        // it started and left behind.
        kill_group(pgid);
        let _ = child.wait().await;
        match finished {
            Err(_) => HookReply::Failed(format!("timed out after {} ms", timeout.as_millis())),
            Ok(Err(ReadFailure::OverCap(stream))) => HookReply::Failed(format!(
                "its {stream} exceeded {MAX_HOOK_OUTPUT_BYTES} bytes"
            )),
            Ok(Err(ReadFailure::Io(err))) => {
                HookReply::Failed(format!("reading its output: {err}"))
            }
            Ok(Ok((status, stdout, stderr))) => match status.code() {
                Some(0) => HookReply::Answered(stdout),
                Some(2) => {
                    let reason = String::from_utf8_lossy(&stderr).trim().to_owned();
                    HookReply::Blocked(if reason.is_empty() {
                        "the hook exited with code 2".to_owned()
                    } else {
                        reason
                    })
                }
                Some(code) => HookReply::Failed(format!(
                    "exited with code {code}: {}",
                    String::from_utf8_lossy(&stderr).trim()
                )),
                None => HookReply::Failed(format!("was killed ({status})")),
            },
        }
    }
}

async fn read_capped(
    stream: impl AsyncRead + Unpin,
    name: &'static str,
) -> Result<Vec<u8>, ReadFailure> {
    let mut bytes = Vec::new();
    let cap = u64::try_from(MAX_HOOK_OUTPUT_BYTES).unwrap_or(u64::MAX);
    stream
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(ReadFailure::Io)?;
    if bytes.len() > MAX_HOOK_OUTPUT_BYTES {
        return Err(ReadFailure::OverCap(name));
    }
    Ok(bytes)
}

fn kill_group(pgid: Option<libc::pid_t>) {
    if let Some(pgid) = pgid.filter(|p| *p > 0) {
        // SAFETY: kill(2) on a process group id; no memory is involved. The group is the
        // hook's own (process_group(0) made its pid the group id) and the child is not yet
        // reaped, so the id cannot have been reused.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kept_variables_pass_and_path_has_a_fallback() {
        let env = clean_environment(|name| match name {
            "HOME" => Some("/home/h".into()),
            "TOOLD_AUTH_TOKENS" | "AWS_SECRET_ACCESS_KEY" => Some("secret".into()),
            _ => None,
        });
        let names: Vec<_> = env
            .iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["HOME", "PATH"]);
        assert_eq!(env[1].1, DEFAULT_PATH);
    }
}
