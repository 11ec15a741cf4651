//! Tools provided from outside (DESIGN §11) against the real daemon, with the real Python
//! provider (`examples/python/provider.py`, grpcio from `TOOLD_TEST_PYTHON`) as a child
//! process: `registration` (accepted and refused registrations, listings, who holds a name),
//! `calls` (provided tools in every format, mixed batches, overlap, progress, permissions,
//! hooks, audit, events), `ending` (cancel on interrupt and timeout, a provider killed
//! mid-call, two connections sharing calls), `http` (the HTTP provider door, with a small
//! Rust provider in the test).

mod calls;
mod ending;
mod http;
mod registration;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::auth::{ADMIN, AGENT_A, AGENT_B, OBSERVER};
use crate::http::harness::Toold;
use crate::support::python::python;

/// How long a test waits for the provider before failing (a guard, not a measurement).
const GUARD: Duration = Duration::from_secs(60);

/// The daemon with agents A and B, observer O and an admin (`crate::auth`'s tokens), plus
/// the settings in `head` (hooks, rules).
pub fn daemon(head: &str) -> Toold {
    let settings = format!(
        "{head}\n\
         [[auth.tokens]]\nname = \"agent-a\"\ntoken = \"{AGENT_A}\"\nrole = \"agent\"\n\n\
         [[auth.tokens]]\nname = \"agent-b\"\ntoken = \"{AGENT_B}\"\nrole = \"agent\"\n\n\
         [[auth.tokens]]\nname = \"observer-o\"\ntoken = \"{OBSERVER}\"\nrole = \"observer\"\n"
    );
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, settings).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let mut toold = Toold::start_with(dir, &["--config", &file, "--auth-token", ADMIN]);
    toold.token = Some(AGENT_A.to_owned());
    toold
}

/// The Python provider, running; killed when dropped.
pub struct Provider {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    pub connection_id: String,
}

impl Provider {
    /// Starts `provider.py` against `toold` as the holder of `token`, with `args`, and waits
    /// for its registration; `Err` with its `refused …` line when toold refused it. `None`
    /// when there is no Python (skipped outside CI).
    pub async fn start(
        toold: &Toold,
        token: &str,
        args: &[&str],
    ) -> Option<Result<Provider, String>> {
        Provider::start_script("provider.py", toold, token, args).await
    }

    /// [`Provider::start`] with another script of `examples/python/` (`agent_provider.py`).
    pub async fn start_script(
        script: &str,
        toold: &Toold,
        token: &str,
        args: &[&str],
    ) -> Option<Result<Provider, String>> {
        let python = python("the Python tool provider")?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/python")
            .join(script);
        let mut child = Command::new(python)
            .arg(script)
            .arg(toold.base.trim_start_matches("http://"))
            .args(["--token", token])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let mut provider = Provider {
            child,
            lines,
            connection_id: String::new(),
        };
        let first = provider.next_line().await;
        if first.starts_with("refused") {
            return Some(Err(first));
        }
        let words: Vec<&str> = first.split(' ').collect();
        assert_eq!(words[0], "registered", "{first}");
        provider.connection_id = words[1].to_owned();
        Some(Ok(provider))
    }

    /// [`Provider::start`] that must register.
    pub async fn connect(toold: &Toold, token: &str, args: &[&str]) -> Option<Provider> {
        Some(
            Provider::start(toold, token, args)
                .await?
                .expect("registered"),
        )
    }

    /// The provider's next line of output.
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(GUARD, self.lines.recv())
            .await
            .expect("a line from the provider within the guard time")
            .expect("the provider is running")
    }

    /// Reads lines until one starts with `prefix`; that line.
    pub async fn line_starting(&mut self, prefix: &str) -> String {
        loop {
            let line = self.next_line().await;
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Kills the process (`kill -9`) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A session of A that names `providers`; its id.
pub async fn session(toold: &Toold, providers: &[&str]) -> String {
    toold.session_with(&json!({"providers": providers})).await
}

/// The names of the tools `session` offers (toold format).
pub async fn tool_names(toold: &Toold, session: &str) -> Vec<String> {
    let reply = toold
        .get(&format!("/v1/sessions/{session}/tools?format=toold"))
        .await;
    reply.body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", reply.body))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The output of a successful result.
pub fn ok_output(result: &Value) -> &str {
    assert_eq!(result["is_error"], false, "{result}");
    result["output"].as_str().unwrap()
}
