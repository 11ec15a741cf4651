//! TLS on the one listener, against the real daemon started with `--tls-cert`/`--tls-key`: a
//! test CA and server certificates for `localhost` and 127.0.0.1 are made at test time
//! (rcgen). Python's `requests` and grpcio trust that CA and work on the one port (`clients`,
//! as does the terminal client with `--ca-cert`); plain HTTP on the port is refused while the
//! daemon keeps serving (`refusal`); a certificate rewritten in place and announced with
//! SIGHUP is served to new connections while an open one goes on (`reload`); half or broken
//! TLS settings stop the start with an error naming what is wrong (`start`).
//!
//! Certificates are told apart by their DER bytes, read from the handshake of a rustls client
//! (`handshake`), so "the new certificate is served" is checked byte for byte.

mod clients;
mod refusal;
mod reload;
mod start;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::support::daemon::DaemonProcess;

/// A certificate authority made for one test, and the files of what it signed.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA's certificate (PEM), the file clients trust.
    pub ca_file: PathBuf,
}

/// A server certificate and key written to files.
pub struct ServerFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    /// A new CA, its certificate written to `dir/ca.pem`.
    pub fn new(dir: &Path) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, "toold test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, issuer.pem()).unwrap();
        TestCa { issuer, ca_file }
    }

    /// A server certificate for `localhost` and 127.0.0.1 named `common_name`, written to
    /// `files` (overwriting them); returns its DER.
    pub fn issue(&self, common_name: &str, files: &ServerFiles) -> CertificateDer<'static> {
        self.issue_for(&["localhost", "127.0.0.1"], common_name, files)
    }

    /// [`TestCa::issue`] for the host `names` (DNS names or IP addresses) instead.
    pub fn issue_for(
        &self,
        names: &[&str],
        common_name: &str,
        files: &ServerFiles,
    ) -> CertificateDer<'static> {
        let names = names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        cert.der().clone()
    }

    /// The CA's certificate, as a client's root store.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        roots
    }
}

/// A daemon serving TLS over `dir`, with a CA and a first certificate (common name `first`).
pub struct TlsDaemon {
    pub daemon: DaemonProcess,
    pub ca: TestCa,
    pub files: ServerFiles,
    /// The DER of the certificate issued at start.
    pub first: CertificateDer<'static>,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

impl TlsDaemon {
    pub fn start(dir: &Path) -> TlsDaemon {
        let ca = TestCa::new(dir);
        let files = ServerFiles {
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
        };
        let first = ca.issue("first", &files);
        let cert = files.cert.to_str().unwrap();
        let key = files.key.to_str().unwrap();
        let daemon = DaemonProcess::start(dir, &["--tls-cert", cert, "--tls-key", key]);
        let address = daemon
            .base
            .strip_prefix("https://")
            .unwrap_or_else(|| panic!("a TLS daemon announces https://, got {}", daemon.base))
            .to_owned();
        TlsDaemon {
            daemon,
            ca,
            files,
            first,
            address,
        }
    }

    /// A new TLS connection (ALPN `http/1.1`) trusting the test CA, for `localhost`.
    pub async fn connect(&self) -> TlsStream<TcpStream> {
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(self.ca.roots())
        .with_no_client_auth();
        let mut config = config;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = TcpStream::connect(&self.address).await.unwrap();
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .expect("the TLS handshake succeeds with the test CA")
    }
}

/// The certificate the server presented on `stream`.
pub fn served_certificate(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    let (_, connection) = stream.get_ref();
    connection
        .peer_certificates()
        .expect("the server sent a certificate")[0]
        .clone()
}

/// `GET path` on a kept-alive HTTP/1.1 connection; the status line and the body.
pub async fn get(stream: &mut TlsStream<TcpStream>, path: &str) -> (String, String) {
    let answer = get_unbounded(stream, path);
    crate::support::deadline::within(crate::support::deadline::STEP, "an HTTPS answer", answer)
        .await
}

async fn get_unbounded(stream: &mut TlsStream<TcpStream>, path: &str) -> (String, String) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).await.unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.unwrap();
    (status.trim().to_owned(), String::from_utf8(body).unwrap())
}
