//! The accept loop: each accepted connection is served by hyper (HTTP/1.1 and HTTP/2, which
//! gRPC uses; over TLS when the listener has a certificate) on a task of its own; on drain,
//! accepting stops, every connection is told to finish what it has in hand, and the loop
//! returns once they have.
//!
//! Why not `axum::serve`, which does the same: it spawns each connection's future itself, and
//! toold wraps that future in [`RepollOnSelfWake`] (see `self_wake.rs`), which saves a wake-up
//! of a second worker on every POST (unless `[server] repoll_self_wake` is off). (An HTTP/2
//! connection's streams, which hyper runs as tasks of their own through the executor, are not
//! wrapped: gRPC's single-call p50 measured the same either way.) Everything else mirrors `axum::serve`: `TCP_NODELAY` on
//! every connection, connection-level accept errors skipped, others (out of file descriptors)
//! logged and retried after a pause.
//!
//! The TLS handshake (`tls.rs`) runs on the connection's task, never in the accept loop, so a
//! slow or plain-text client holds up no one else. A connection is watched for the drain from
//! the moment it is accepted: one still in its handshake when the drain begins is closed as
//! soon as the handshake ends.

use std::io;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::self_wake::RepollOnSelfWake;

/// Pause after an accept error that is not the connection's own (`EMFILE`, `ENFILE`), as
/// hyper's and axum's servers do, so a full descriptor table is not spun on.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Serves `app` on every connection `listener` accepts (over TLS with `tls`) until `drain`
/// fires, then until the connections still open have finished. With `repoll_self_wake`, each
/// connection runs inside [`RepollOnSelfWake`].
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    repoll_self_wake: bool,
    drain: CancellationToken,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(err) => {
                    accept_failed(err).await;
                    continue;
                }
            },
            () = drain.cancelled() => break,
        };
        let served = serve_one(
            builder.clone(),
            stream,
            app.clone(),
            tls.clone(),
            graceful.watcher(),
        );
        if repoll_self_wake {
            tokio::spawn(RepollOnSelfWake::new(served));
        } else {
            tokio::spawn(served);
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Serves one connection to its end: the handshake first with `tls` (a connection that fails
/// it is dropped), then hyper, watched for the drain by `watcher`.
async fn serve_one(
    builder: auto::Builder<TokioExecutor>,
    stream: TcpStream,
    app: Router,
    tls: Option<TlsAcceptor>,
    watcher: Watcher,
) {
    // Responses go out as soon as they are written: without TCP_NODELAY a response written in
    // pieces (HTTP/2 writes headers, data and trailers apart) waits for the client's
    // acknowledgement of the first.
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(error = %err, "cannot set TCP_NODELAY");
    }
    let service = TowerToHyperService::new(app);
    let served = match tls {
        None => {
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            watcher.watch(connection.into_owned()).await
        }
        Some(acceptor) => {
            let Some(stream) = super::tls::accept(&acceptor, stream).await else {
                return;
            };
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            watcher.watch(connection.into_owned()).await
        }
    };
    if let Err(err) = served {
        tracing::trace!(error = %err, "connection ended with an error");
    }
}

async fn accept_failed(err: io::Error) {
    // The connection went away before it was accepted: nothing to do but take the next.
    if matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
}
