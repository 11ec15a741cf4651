//! The floor: a bare axum handler in the bench process that reads the same 4 KiB file and
//! answers it as JSON. It parses a JSON body naming the file, as toold does, and reads on the
//! calling thread (the file is in the page cache), so it is the least work this exchange can
//! cost over HTTP with axum. It is served by `axum::serve` on its own multi-threaded runtime
//! (as toold is), not on the client's.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

/// Serves the floor on a loopback port on a runtime of its own; its address.
pub fn start(workspace: PathBuf) -> SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("floor runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("floor binds");
            let _ = sender.send(listener.local_addr().expect("floor address"));
            let app = Router::new()
                .route("/read", post(read))
                .with_state(workspace);
            let _ = axum::serve(listener, app).await;
        });
    });
    receiver.recv().expect("floor starts")
}

async fn read(
    State(workspace): State<PathBuf>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, StatusCode> {
    let name = body["file_path"].as_str().ok_or(StatusCode::BAD_REQUEST)?;
    let content =
        std::fs::read_to_string(workspace.join(name)).map_err(|_| StatusCode::NOT_FOUND)?;
    Ok(Json(json!({"output": content, "is_error": false})))
}
