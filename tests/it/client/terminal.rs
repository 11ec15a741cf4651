//! The client on a terminal (a pseudo-terminal from `script`, util-linux's, part of every
//! Debian system): `call` turns a spinner with the tool's progress on stderr, then clears it
//! before the output; `tail` colours each session's id; `cp` counts the bytes on a line of its
//! own.

use std::process::Stdio;

use serde_json::json;

use super::harness::{Ran, ended};
use crate::http::harness::Toold;
use crate::support::daemon::without_settings;

/// `toold ARGS` (a shell line) on a pseudo-terminal: stdout and stderr both go to it, and
/// come back together.
async fn on_a_terminal(toold: &Toold, line: &str) -> Ran {
    let binary = env!("CARGO_BIN_EXE_toold");
    let mut command = std::process::Command::new("script");
    without_settings(&mut command);
    command
        .args(["-qfec", &format!("{binary} {line}"), "/dev/null"])
        .env("TOOLD_URL", &toold.base)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("script runs");
    ended(child).await
}

#[tokio::test]
async fn call_on_a_terminal_turns_a_spinner_with_the_progress_then_prints_the_output() {
    let toold = Toold::start();
    let input = json!({"command": "sleep 0.5; echo finished"}).to_string();
    let ran = on_a_terminal(&toold, &format!("call bash '{input}'")).await;
    assert_eq!(ran.code, 0, "{ran:?}");
    // A frame of the spinner, the tool's name and its progress (bash reports its pid).
    assert!(ran.stdout.contains("\r\x1b[K⠋ bash"), "{ran:?}");
    assert!(ran.stdout.contains("pid="), "{ran:?}");
    // Cleared, then the output on a line of its own.
    assert!(ran.stdout.contains("\r\x1b[Kfinished\r\n"), "{ran:?}");
}

#[tokio::test]
async fn tail_on_a_terminal_colours_each_session() {
    let toold = Toold::start();
    let session = toold.session().await;
    let ran = on_a_terminal(
        &toold,
        "tail --since-seq 0 --type session:start & sleep 2; kill $!",
    )
    .await;
    let line = ran
        .stdout
        .lines()
        .find(|l| l.contains(&session))
        .unwrap_or_else(|| panic!("the session's start is shown: {ran:?}"));
    assert!(line.contains(&format!("m{session}\x1b[0m")), "{line:?}");
}

#[tokio::test]
async fn cp_on_a_terminal_counts_the_bytes_and_ends_the_line() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("one.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let file = file.to_str().unwrap();
    let up = on_a_terminal(&toold, &format!("cp {file} {session}:one.bin")).await;
    assert_eq!(up.code, 0, "{up:?}");
    assert!(
        up.stdout.contains("\rtoold: sent 1.0 MiB\x1b[K\r\n"),
        "{up:?}"
    );
    let back = local.path().join("back.bin");
    let back = back.to_str().unwrap();
    let down = on_a_terminal(&toold, &format!("cp {session}:one.bin {back}")).await;
    assert_eq!(down.code, 0, "{down:?}");
    assert!(
        down.stdout.contains("\rtoold: received 1.0 MiB\x1b[K\r\n"),
        "{down:?}"
    );
}
