//! Starts the real daemon and connects a generated gRPC client to it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tonic::transport::Channel;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{self, ToolCall};

pub type Client = ToolServiceClient<Channel>;

/// How long a test waits for anything before failing (a guard, not a measurement).
pub const GUARD: Duration = Duration::from_secs(30);

pub struct Toold {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub dir: tempfile::TempDir,
}

impl Toold {
    pub fn start() -> Toold {
        Toold::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Toold {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("projects")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_toold"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--allowed-root")
            .arg(dir.path().join("projects"))
            .args(extra)
            .env_remove("TOOLD_CONFIG")
            .env_remove("TOOLD_LISTEN")
            .env_remove("TOOLD_AUTH_TOKENS")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("toold starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("toold listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Toold { child, base, dir }
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.base.clone())
            .unwrap()
            .connect()
            .await
            .expect("gRPC connects")
    }

    pub async fn client(&self) -> Client {
        ToolServiceClient::new(self.channel().await)
    }

    /// A new session in a fresh workspace: its id and working directory.
    pub async fn session(&self, client: &mut Client) -> (String, std::path::PathBuf) {
        let session = client
            .create_session(proto::CreateSessionRequest::default())
            .await
            .expect("session created")
            .into_inner();
        (session.id, session.working_directory.into())
    }
}

impl Drop for Toold {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn call(id: &str, name: &str, input: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input_json: input.to_string(),
    }
}

/// The next item of a stream within the guard time.
pub async fn next<T>(stream: &mut tonic::Streaming<T>) -> Option<T> {
    tokio::time::timeout(GUARD, stream.message())
        .await
        .expect("a message within the guard time")
        .expect("the stream does not fail")
}
