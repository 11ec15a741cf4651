//! Access tokens of the platform's provider (DESIGN §13) against the real daemon, minted by a
//! real OpenID Certified provider: panva's `oidc-provider` (`provider.mjs`), started here on
//! loopback with client credentials and resource indicators, each test with its own.
//!
//! - `sdk`: the official Python MCP SDK finds the provider through toold's metadata and gets
//!   its token itself; audit rows name the token's principal.
//! - `doors`: HTTP, SSE, gRPC, both MCP eras and the dashboard's API with provider-issued
//!   tokens, each role enforced; the protected-resource metadata; 403 `insufficient_scope`.
//! - `dashboard`: `/ui` in a real browser, logged in with a pasted access token.
//! - `bad_tokens`: every bad token a 401 with the RFC 6750 challenge, counted in `/metrics`.
//! - `keys`: a key rotation at the provider picked up without a restart; the provider stopped
//!   for a minute refuses nothing signed with cached keys.
//! - `secrets`: a token reaches no hook, and no log, event or audit row.
//!
//! The provider lives in `TOOLD_TEST_OIDC_PROVIDER` (`.ci/oidc_provider.sh`), run with
//! `TOOLD_TEST_NODE` (Node 22); without them the tests skip outside CI.

mod bad_tokens;
mod dashboard;
mod doors;
mod keys;
mod sdk;
mod secrets;

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::harness::Toold;
use crate::support::deadline::first_line_within;

/// How long the provider may take to listen (Node starting, an RSA key generated).
const PROVIDER_START: Duration = Duration::from_secs(60);

/// A static admin token, configured beside the issuer (static tokens keep working).
pub const STATIC_ADMIN: &str = "static-admin-token";

/// The provider's package and the Node to run it with, or `None` (skipped outside CI).
fn provider_install() -> Option<(PathBuf, PathBuf)> {
    let prefix = std::env::var_os("TOOLD_TEST_OIDC_PROVIDER").map(PathBuf::from);
    let node = std::env::var_os("TOOLD_TEST_NODE")
        .map(PathBuf::from)
        .or_else(|| crate::support::tool_on_path("node"));
    match (prefix, node) {
        (Some(prefix), Some(node)) => Some((prefix, node)),
        _ => {
            crate::support::skip_unless_ci(
                "TOOLD_TEST_OIDC_PROVIDER or TOOLD_TEST_NODE is not set (.ci/oidc_provider.sh)",
            );
            None
        }
    }
}

/// A running `oidc-provider`, killed when dropped.
pub struct Provider {
    child: Option<Child>,
    node: PathBuf,
    dir: Arc<tempfile::TempDir>,
    resource: String,
    port: u16,
    pub issuer: String,
    http: reqwest::Client,
}

impl Provider {
    /// The provider minting tokens for `resource`, on a port of its own.
    pub fn start(resource: &str) -> Option<Provider> {
        let (prefix, node) = provider_install()?;
        let dir = Arc::new(tempfile::tempdir().unwrap());
        // The script beside a link to the package, so Node resolves `oidc-provider` from it.
        std::fs::write(
            dir.path().join("provider.mjs"),
            include_str!("provider.mjs"),
        )
        .unwrap();
        std::os::unix::fs::symlink(prefix.join("node_modules"), dir.path().join("node_modules"))
            .unwrap();
        std::fs::create_dir(dir.path().join("state")).unwrap();
        let mut provider = Provider {
            child: None,
            node,
            dir,
            resource: resource.to_owned(),
            port: 0,
            issuer: String::new(),
            http: reqwest::Client::new(),
        };
        provider.spawn();
        Some(provider)
    }

    fn spawn(&mut self) {
        let mut command = Command::new(&self.node);
        command
            .arg(self.dir.path().join("provider.mjs"))
            .arg(self.dir.path().join("state"))
            .arg(&self.resource)
            .arg(self.port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("node runs");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let line = first_line_within(stdout, PROVIDER_START)
            .expect("the provider listens in time")
            .unwrap();
        let issuer = line
            .trim()
            .strip_prefix("issuer ")
            .unwrap_or_else(|| panic!("the provider printed {line:?}, not its issuer"));
        self.issuer = issuer.to_owned();
        self.port = issuer.rsplit(':').next().unwrap().parse().unwrap();
        self.child = Some(child);
    }

    /// Stops the provider (its port stays its own to start on again).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again: the same issuer, the same keys.
    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// An access token for `client_id` (its secret is `secret-of-{client_id}`, see
    /// `provider.mjs`), asked for `scope`, for the resource.
    pub async fn token(&self, client_id: &str, scope: &str) -> String {
        let reply = self
            .http
            .post(format!("{}/token", self.issuer))
            .basic_auth(client_id, Some(format!("secret-of-{client_id}")))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", scope),
                ("resource", self.resource.as_str()),
            ])
            .send()
            .await
            .unwrap();
        let text = reply.text().await.unwrap();
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {body}"))
            .to_owned()
    }

    /// `claims` signed with the provider's current key (`foreign`: a key it never published).
    pub async fn sign(&self, claims: Value, foreign: bool) -> String {
        self.post_test("sign", json!({"claims": claims, "foreign": foreign}))
            .await
    }

    /// A new signing key at the provider; its `kid`.
    pub async fn rotate(&self) -> String {
        self.post_test("rotate", json!({})).await
    }

    /// The current key's public key, as PEM.
    pub async fn public_pem(&self) -> String {
        let reply = self
            .http
            .get(format!("{}/test/public-pem", self.issuer))
            .send()
            .await
            .unwrap();
        reply.text().await.unwrap()
    }

    async fn post_test(&self, what: &str, body: Value) -> String {
        let reply = self
            .http
            .post(format!("{}/test/{what}", self.issuer))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success(), "/test/{what}");
        reply.text().await.unwrap()
    }

    /// Claims valid for the resource, for `sub`, with `extra` over them.
    pub fn claims(&self, sub: &str, extra: Value) -> Value {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut claims = json!({
            "iss": self.issuer, "aud": self.resource, "sub": sub, "iat": now, "exp": now + 600,
            "scope": "toold.execute", "jti": format!("jti-{sub}-{now}"),
        });
        for (key, value) in extra.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free loopback port (bound and released: the daemon binds it next).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A daemon accepting the provider's tokens, and the provider.
pub struct Setup {
    pub toold: Toold,
    pub provider: Provider,
    /// `http://127.0.0.1:PORT/mcp`: the resource, and where MCP clients connect.
    pub mcp_url: String,
    /// Where the daemon's log (stderr) goes.
    pub log: PathBuf,
    _process: Daemon,
}

/// The daemon's process, killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The provider and a daemon on a port chosen first (the resource names it), with
/// `[auth.oidc]` (roles `toold-agent`… mapped), `STATIC_ADMIN`, and `settings` added.
pub fn setup(settings: &str) -> Option<Setup> {
    let port = free_port();
    let mcp_url = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&mcp_url)?;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = write_settings(dir.path(), &provider.issuer, &mcp_url, settings);
    let listen = format!("127.0.0.1:{port}");
    let log = dir.path().join("toold.log");
    std::fs::create_dir_all(dir.path().join("projects")).unwrap();
    let mut command = crate::support::daemon::command_on(
        dir.path(),
        &listen,
        &["--config", file.to_str().unwrap()],
    );
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("toold starts");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let daemon = Daemon(child);
    let line = first_line_within(stdout, PROVIDER_START)
        .expect("toold listens in time")
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("toold listening on ")
        .unwrap_or_else(|| {
            panic!(
                "toold printed {line:?}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })
        .to_owned();
    let mut toold = Toold::at(&base, dir);
    toold.token = Some(STATIC_ADMIN.to_owned());
    Some(Setup {
        toold,
        provider,
        mcp_url,
        log,
        _process: daemon,
    })
}

fn write_settings(dir: &Path, issuer: &str, audience: &str, settings: &str) -> PathBuf {
    let file = dir.join("toold.toml");
    let text = format!(
        "{settings}\n\n[[auth.tokens]]\nname = \"static-admin\"\ntoken = \"{STATIC_ADMIN}\"\nrole = \"admin\"\n\n\
         [auth.oidc]\nissuer = \"{issuer}\"\naudience = \"{audience}\"\n\
         [auth.oidc.roles]\nadmin = [\"toold-admin\"]\nagent = [\"toold-agent\"]\nobserver = [\"toold-observer\"]\n"
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// The principal name a token of the provider's client `client_id` carries.
pub fn principal_of(provider: &Provider, client_id: &str) -> String {
    format!("{}#{client_id}", provider.issuer)
}

/// The value of the counter `name` with `label` in the daemon's `/metrics` (0 when absent).
pub async fn counter(toold: &Toold, name: &str, label: &str) -> f64 {
    let (_, text) = toold.get_text("/metrics").await;
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
