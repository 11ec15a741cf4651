//! The real daemon (`support::daemon`) with a generated gRPC client connected to it.

use std::time::Duration;

use tonic::transport::Channel;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{self, ToolCall};

use crate::support::daemon::DaemonProcess;

pub type Client = ToolServiceClient<Channel>;

/// How long a test waits for anything before failing (a guard, not a measurement).
pub const GUARD: Duration = Duration::from_secs(30);

pub struct Toold {
    _process: DaemonProcess,
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
        let process = DaemonProcess::start(dir.path(), extra);
        Toold {
            base: process.base.clone(),
            _process: process,
            dir,
        }
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
