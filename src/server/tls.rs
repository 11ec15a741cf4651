//! The daemon's side of TLS: the certificate loaded at start from `[server] tls_cert` and
//! `tls_key` (both or neither), reloaded on SIGHUP, and the warning for a daemon reachable
//! from other machines in clear text. The listener's side (the resolver, the handshake) is
//! `api::listener`'s.
//!
//! SIGHUP is handled only when TLS is configured; without a certificate it keeps its default
//! action (the process ends), as before TLS existed. A reload that fails is logged with the
//! file at fault and the old certificate stays; connections already open are never touched.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::api::listener::ServerCertificate;
use crate::config::ServerSettings;

use super::ServerError;

/// The certificate `server` names, read now; `None` without TLS.
pub fn load(server: &ServerSettings) -> Result<Option<Arc<ServerCertificate>>, ServerError> {
    let Some(files) = server.tls_files()? else {
        return Ok(None);
    };
    let certificate = ServerCertificate::load(&files.certificate, &files.key)?;
    Ok(Some(Arc::new(certificate)))
}

/// What to warn about when a daemon listens on `address` with or without TLS: a non-loopback
/// address without TLS sends bearer tokens and tool output over the network in clear text.
pub fn clear_text_warning(address: SocketAddr, tls: bool) -> Option<String> {
    if tls || address.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "listening on non-loopback address {address} without TLS: bearer tokens, tool inputs \
         and tool output cross the network in clear text (set --tls-cert and --tls-key)"
    ))
}

/// Registers SIGHUP now (so a hangup sent once the daemon is listening cannot end it) and
/// reloads `certificate` on each one, in a task of its own.
pub fn reload_on_hangup(certificate: Arc<ServerCertificate>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(err) => {
            tracing::error!(error = %err, "cannot listen for SIGHUP: the TLS certificate will not be reloaded");
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let file = certificate.certificate_path().display().to_string();
            match certificate.reload() {
                Ok(()) => tracing::info!(certificate = %file, "SIGHUP: TLS certificate reloaded"),
                Err(err) => tracing::error!(
                    error = %err,
                    "SIGHUP: reloading the TLS certificate failed; still serving the previous one"
                ),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_non_loopback_address_without_tls_is_warned_about() {
        let cases = [
            ("127.0.0.1:7070", false, false),
            ("[::1]:7070", false, false),
            ("127.0.0.1:7070", true, false),
            ("0.0.0.0:7070", true, false),
            ("0.0.0.0:7070", false, true),
            ("[::]:7070", false, true),
            ("10.1.2.3:7070", false, true),
        ];
        for (address, tls, warned) in cases {
            let address: SocketAddr = address.parse().unwrap();
            let warning = clear_text_warning(address, tls);
            assert_eq!(warning.is_some(), warned, "{address} tls={tls}");
            if let Some(text) = warning {
                assert!(
                    text.contains(&address.to_string()) && text.contains("clear text"),
                    "{text}"
                );
            }
        }
    }
}
