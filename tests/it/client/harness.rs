//! The client binary, run against a daemon: `toold ARGS` with `TOOLD_URL` set to the
//! daemon's address (and `TOOLD_TOKEN` to its token, when it has one).

use std::process::Stdio;
use std::time::Duration;

use crate::http::harness::Toold;
use crate::support::daemon::without_settings;

/// What a finished client run left: its exit code and its output.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `toold ARGS` against `url`, with `token` when given; nothing spawned yet.
pub fn client_at(url: &str, token: Option<&str>, args: &[&str]) -> tokio::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toold"));
    without_settings(&mut command);
    command
        .args(args)
        .env("TOOLD_URL", url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("TOOLD_TOKEN", token);
    }
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    command
}

/// `toold ARGS` against `toold`, with its token.
pub fn client(toold: &Toold, args: &[&str]) -> tokio::process::Command {
    client_at(&toold.base, toold.token.as_deref(), args)
}

/// Runs `command` to its end (60 s guard).
pub async fn finish(mut command: tokio::process::Command) -> Ran {
    ended(command.spawn().expect("the client starts")).await
}

/// Waits for a spawned client to end (60 s guard).
pub async fn ended(child: tokio::process::Child) -> Ran {
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the client finishes within 60 s")
        .expect("the client's output is read");
    Ran {
        code: output.status.code().expect("the client exits, not killed"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// `toold ARGS` against `toold`, run to its end.
pub async fn run(toold: &Toold, args: &[&str]) -> Ran {
    finish(client(toold, args)).await
}
