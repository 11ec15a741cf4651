//! TLS on the one listener: the certificate it serves ([`ServerCertificate`], reloaded in
//! place) and each connection's handshake ([`accept`]).
//!
//! The certificate and key are read from PEM files at start, where a file that cannot be read
//! or holds no valid PEM stops the daemon with an error naming the file. [`ServerCertificate`]
//! is rustls' certificate resolver: every handshake asks it for the current certificate, so a
//! reload (SIGHUP, wired by `server`) swaps the certificate under a lock for new connections
//! while connections already open keep the session keys they agreed on. A reload that fails
//! (a half-written file, a key that does not match) keeps the old certificate.
//!
//! ALPN offers `h2` and `http/1.1`; hyper's automatic builder then reads the connection's
//! first bytes as before, so gRPC (which needs HTTP/2) and HTTP share the port as they do
//! without TLS. A client that offers no ALPN gets HTTP/1.1 or HTTP/2 by its preface.
//!
//! Plain HTTP on the TLS port (decided here; the issue leaves it open): the first byte is
//! peeked before the handshake. A TLS connection starts with a handshake record (`0x16`); a
//! connection that starts with an ASCII letter is taken for a plain HTTP/1.1 request and gets
//! `400 Bad Request` with a body saying the port speaks TLS, then is closed, so a person who
//! typed `http://` sees why; anything else is closed without an answer (what the client sent
//! is read and dropped first, up to 64 KiB, so the close is no reset that could overtake the
//! 400). Either way the accept loop goes on: the check runs on the connection's own task. A handshake (or the wait for the first
//! byte) that takes longer than [`HANDSHAKE_TIMEOUT`] is dropped, so an idle socket cannot
//! hold a drain.
//!
//! The crypto provider is rustls' `ring` (as the bridge's client uses); TLS 1.2 and 1.3.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Time from accepting a connection to the end of its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first byte of a TLS connection: a handshake record's content type.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Bytes of a plain-text connection read (and dropped) before it is closed.
const PLAIN_DRAIN_LIMIT: u64 = 64 * 1024;

/// What a plain HTTP/1.1 request on the TLS port is answered with.
const PLAIN_HTTP_REFUSAL: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
content-type: text/plain; charset=utf-8\r\n\
content-length: 47\r\n\
connection: close\r\n\
\r\n\
this port speaks TLS: use https:// to reach it\n";

/// Why a certificate or key could not be loaded; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS file {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("TLS certificate {path}: {problem}")]
    Certificate { path: PathBuf, problem: String },
    #[error("TLS key {path}: {problem}")]
    Key { path: PathBuf, problem: String },
    #[error("TLS key {key} does not fit certificate {certificate}: {problem}")]
    Mismatch {
        certificate: PathBuf,
        key: PathBuf,
        problem: String,
    },
}

/// The certificate the listener serves, read from two PEM files and reloadable from them.
#[derive(Debug)]
pub struct ServerCertificate {
    certificate_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServerCertificate {
    /// Reads the certificate chain and the key; any problem is an error naming the file.
    pub fn load(certificate_path: &Path, key_path: &Path) -> Result<ServerCertificate, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = read_certified_key(certificate_path, key_path, &provider)?;
        Ok(ServerCertificate {
            certificate_path: certificate_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: RwLock::new(Arc::new(current)),
        })
    }

    /// Reads both files again and serves what they hold to new connections; on an error the
    /// certificate served so far stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = read_certified_key(&self.certificate_path, &self.key_path, &self.provider)?;
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(fresh);
        Ok(())
    }

    /// The certificate file (for logs).
    pub fn certificate_path(&self) -> &Path {
        &self.certificate_path
    }

    /// An acceptor serving this certificate (as it is at each handshake) with ALPN `h2` and
    /// `http/1.1`.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, rustls::Error> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ServerCertificate {
    fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a whole certificate: the writer only swaps an `Arc`.
        let current = self
            .current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        current.clone()
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read_certified_key(
    certificate_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = read_chain(certificate_path)?;
    let key = read_key(key_path)?;
    CertifiedKey::from_der(chain, key, provider).map_err(|err| TlsError::Mismatch {
        certificate: certificate_path.to_owned(),
        key: key_path.to_owned(),
        problem: err.to_string(),
    })
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let problem = |problem: String| TlsError::Certificate {
        path: path.to_owned(),
        problem,
    };
    let chain = CertificateDer::pem_slice_iter(&read_file(path)?)
        .collect::<Result<Vec<_>, pem::Error>>()
        .map_err(|err| problem(format!("invalid PEM: {err}")))?;
    if chain.is_empty() {
        return Err(problem("no CERTIFICATE block in the file".into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(&read_file(path)?).map_err(|err| TlsError::Key {
        path: path.to_owned(),
        problem: match err {
            pem::Error::NoItemsFound => "no PRIVATE KEY block in the file".into(),
            other => format!("invalid PEM: {other}"),
        },
    })
}

/// The handshake of one accepted connection, or `None` when it is not TLS (a plain HTTP
/// request is answered with a 400 first), fails, or takes longer than [`HANDSHAKE_TIMEOUT`].
pub async fn accept(acceptor: &TlsAcceptor, stream: TcpStream) -> Option<TlsStream<TcpStream>> {
    let handshake = async {
        let mut first = [0u8; 1];
        let peeked = stream.peek(&mut first).await.ok()?;
        if peeked == 0 || first[0] != TLS_HANDSHAKE_RECORD {
            refuse_plain(stream, first[0], peeked).await;
            return None;
        }
        match acceptor.accept(stream).await {
            Ok(tls) => Some(tls),
            Err(err) => {
                tracing::debug!(error = %err, "TLS handshake failed");
                None
            }
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .unwrap_or_else(|_| {
            tracing::debug!("TLS handshake timed out");
            None
        })
}

/// Answers what looks like a plain HTTP request with a 400, then closes the connection.
async fn refuse_plain(mut stream: TcpStream, first: u8, peeked: usize) {
    if peeked == 0 {
        return;
    }
    if first.is_ascii_alphabetic() {
        tracing::debug!("plain HTTP on the TLS port: answered 400");
        // Best effort: a client that already left needs no answer.
        let _ = stream.write_all(PLAIN_HTTP_REFUSAL).await;
    }
    // The request is not parsed, but read and dropped until the client closes (or
    // [`PLAIN_DRAIN_LIMIT`] bytes): a socket closed with unread bytes is reset, and the reset
    // can overtake the answer on its way to the client.
    let _ = stream.shutdown().await;
    let mut sink = tokio::io::sink();
    let _ = tokio::io::copy(&mut (&mut stream).take(PLAIN_DRAIN_LIMIT), &mut sink).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_http_refusal_has_the_length_it_declares() {
        let text = std::str::from_utf8(PLAIN_HTTP_REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{text}"
        );
    }

    /// A self-signed certificate for `localhost` written to `dir/NAME.pem` and `dir/NAME.key`.
    fn write_certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        (cert, key, made.cert.der().to_vec())
    }

    fn served(certificate: &ServerCertificate) -> Vec<u8> {
        certificate.current().cert[0].to_vec()
    }

    #[test]
    fn a_reload_that_fails_keeps_the_certificate_served() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, first) = write_certificate(dir.path(), "server");
        let certificate = ServerCertificate::load(&cert, &key).unwrap();
        assert_eq!(served(&certificate), first);

        // A key of another certificate: refused, the first one stays.
        let (_, other_key, _) = write_certificate(dir.path(), "other");
        std::fs::copy(&other_key, &key).unwrap();
        let err = certificate.reload().unwrap_err().to_string();
        assert!(err.contains("does not fit"), "{err}");
        assert_eq!(served(&certificate), first);
        // A half-written certificate: refused, the first one stays.
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nMII").unwrap();
        let err = certificate.reload().unwrap_err().to_string();
        assert!(err.contains("server.pem"), "{err}");
        assert_eq!(served(&certificate), first);

        let (_, _, second) = write_certificate(dir.path(), "server");
        certificate.reload().unwrap();
        assert_eq!(served(&certificate), second);
        assert_ne!(first, second);
    }

    #[test]
    fn a_missing_or_invalid_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = ServerCertificate::load(&missing, &missing).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = ServerCertificate::load(&empty, &empty)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("empty.pem") && err.contains("no CERTIFICATE"),
            "{err}"
        );
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = ServerCertificate::load(&broken, &empty)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("broken.pem") && err.contains("invalid PEM"),
            "{err}"
        );
    }
}
