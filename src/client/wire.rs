//! The client's HTTP: one `reqwest` client with the bearer token, JSON requests, and the
//! mapping of what went wrong onto [`ClientError`] (and so onto an exit status). Streams
//! (SSE) are opened here and read by `sse`. Not named `http`: the architecture test reads
//! that name as the `http` crate, which only the doors may use.

use serde_json::Value;

use super::{Connection, ExitStatus};

/// What stopped a client command.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Usage(String),
    #[error("{url} refused the token ({status}): {message}")]
    Auth {
        url: String,
        status: u16,
        message: String,
    },
    #[error("nothing answers at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The daemon answered, but its TLS certificate was refused.
    #[error("the certificate of {url} {problem}: {reason}")]
    Certificate {
        url: String,
        problem: &'static str,
        reason: String,
    },
    #[error("{what} answered {status}: {message}")]
    Refused {
        what: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{0}")]
    Failed(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl ClientError {
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            ClientError::Usage(_) => ExitStatus::Usage,
            ClientError::Refused { code, .. } if code == "invalid_request" => ExitStatus::Usage,
            ClientError::Auth { .. } => ExitStatus::Auth,
            ClientError::Unreachable { .. } => ExitStatus::Unreachable,
            ClientError::Certificate { .. } => ExitStatus::Certificate,
            ClientError::Refused { .. } | ClientError::Failed(_) | ClientError::Output(_) => {
                ExitStatus::ToolFailed
            }
        }
    }

    /// Worth trying again later: the daemon is away, restarting, or busy.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Refused { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }
}

/// The certificates of a PEM bundle (`--ca-cert`), to trust as roots.
fn ca_certificates(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let usage =
        |problem: String| ClientError::Usage(format!("--ca-cert {}: {problem}", path.display()));
    let pem = std::fs::read(path).map_err(|err| usage(format!("cannot read it: {err}")))?;
    let roots = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|err| usage(format!("invalid PEM: {err}")))?;
    if roots.is_empty() {
        return Err(usage("no CERTIFICATE block in the file".into()));
    }
    Ok(roots)
}

/// The daemon at one URL, spoken to with one token.
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl ApiClient {
    pub fn new(connection: &Connection) -> Result<ApiClient, ClientError> {
        let base = connection.url.trim_end_matches('/').to_owned();
        let parsed = url::Url::parse(&base)
            .map_err(|err| ClientError::Usage(format!("invalid --url {base:?}: {err}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::Usage(format!(
                "invalid --url {base:?}: expected http:// or https://"
            )));
        }
        let mut builder =
            reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(5));
        if let Some(path) = &connection.ca_certificate {
            for root in ca_certificates(path)? {
                builder = builder.add_root_certificate(root);
            }
        }
        let http = builder
            .build()
            .map_err(|err| ClientError::Failed(format!("cannot build the HTTP client: {err}")))?;
        Ok(ApiClient {
            http,
            base,
            token: connection.token.clone().filter(|t| !t.is_empty()),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// A request to `path` (which starts with `/`), with the token when there is one.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        let response = self
            .send(self.request(reqwest::Method::GET, path), path)
            .await?;
        self.read_json(response, path).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let builder = with_json(self.request(reqwest::Method::POST, path), body);
        let response = self.send(builder, path).await?;
        self.read_json(response, path).await
    }

    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        let response = self
            .send(self.request(reqwest::Method::DELETE, path), path)
            .await?;
        self.read_json(response, path).await
    }

    /// Sends `builder`; a response that is not a success becomes the error it names.
    pub async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<reqwest::Response, ClientError> {
        let response = builder.send().await.map_err(|err| self.unreachable(&err))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.refusal(response, what).await)
    }

    /// A success's body as JSON.
    pub async fn read_json(
        &self,
        response: reqwest::Response,
        what: &str,
    ) -> Result<Value, ClientError> {
        let bytes = response
            .bytes()
            .await
            .map_err(|err| ClientError::Unreachable {
                url: self.base.clone(),
                reason: format!("the answer to {what} was cut short: {}", error_chain(&err)),
            })?;
        serde_json::from_slice(&bytes)
            .map_err(|err| ClientError::Failed(format!("{what} answered with no JSON: {err}")))
    }

    /// A transport error as the client reports it: a refused certificate as such (the
    /// daemon answered; no retry will change it), anything else as unreachable.
    pub fn unreachable(&self, err: &reqwest::Error) -> ClientError {
        if let Some(problem) = certificate_problem(err) {
            return ClientError::Certificate {
                url: self.base.clone(),
                problem,
                reason: error_chain(err),
            };
        }
        ClientError::Unreachable {
            url: self.base.clone(),
            reason: error_chain(err),
        }
    }

    async fn refusal(&self, response: reqwest::Response, what: &str) -> ClientError {
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("").to_owned();
        let message = body["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}"));
        // A 403 `permission_denied` is the session's mode or rules refusing the request (a
        // path outside the workspace, a write into a read_only session), not the token.
        if status == 401 || (status == 403 && code != "permission_denied") {
            return ClientError::Auth {
                url: self.base.clone(),
                status,
                message,
            };
        }
        ClientError::Refused {
            what: what.to_owned(),
            status,
            code,
            message,
        }
    }
}

/// What is wrong with the certificate, when `err` is rustls refusing the server's: the
/// handshake's error travels as an `io::Error` wrapping the `rustls::Error` (perhaps in
/// another `io::Error`), and an `io::Error`'s `source` skips what it wraps, so the chain is
/// walked through what each `io::Error` wraps.
fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut link = Some(err);
    while let Some(current) = link {
        if let Some(rustls::Error::InvalidCertificate(refused)) =
            current.downcast_ref::<rustls::Error>()
        {
            return Some(describe_certificate_error(refused));
        }
        let wrapped = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        link = wrapped.or_else(|| current.source());
    }
    None
}

fn describe_certificate_error(refused: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as E;
    match refused {
        E::UnknownIssuer | E::BadSignature => {
            "is signed by an authority this client does not trust (a self-signed certificate \
             or a private CA: give its CA with --ca-cert FILE)"
        }
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            "is not valid for the URL's host name"
        }
        E::Expired | E::ExpiredContext { .. } => "has expired",
        E::NotValidYet | E::NotValidYetContext { .. } => "is not valid yet",
        E::Revoked => "is revoked",
        _ => "was refused",
    }
}

/// `body` as the request's JSON body (reqwest's `json` feature is not built).
pub fn with_json(builder: reqwest::RequestBuilder, body: &Value) -> reqwest::RequestBuilder {
    builder
        .header("content-type", "application/json")
        .body(body.to_string())
}

/// `err` and its sources, joined (reqwest's own message alone says only "error sending
/// request").
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `text` with the characters a path segment or query value may not hold escaped.
pub fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
