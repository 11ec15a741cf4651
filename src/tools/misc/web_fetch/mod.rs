//! `web_fetch` (alias `WebFetch`): an HTTP(S) GET whose body comes back as readable text.
//!
//! Owns the request loop: URL checks (http and https only, no credentials, literal addresses
//! against the [`AddressPolicy`]), redirects followed by hand so that every hop is checked
//! again, the whole-fetch timeout, the body-size cap, and the output cut at `max_chars`.
//! Host names are checked after DNS resolution by [`address::CheckedResolver`]; what a body
//! becomes is [`content`]'s business. Deliberately absent: cookies, authentication, proxies
//! (a proxy would resolve names itself and defeat the address check), JavaScript, caching.
//! Every hop carries the call's trace context (`traceparent`, `tracestate`; DESIGN §9).
//! Permission rules match the input URL's host ([`crate::permission::matcher::web_fetch_host`]).

mod address;
mod content;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::{Value, json};
use url::{Host, Url};

use address::CheckedResolver;
pub use address::{AddressPolicy, BlockedAddress};
use content::ContentKind;

use super::{cut_chars, optional_whole_number, string_field};
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};
use crate::tools::WebFetchSettings;

/// The runtime setting (see the `config` tool) that holds the default `max_chars`.
const MAX_CHARS_SETTING: &str = "web_fetch_max_chars";
const DEFAULT_MAX_CHARS: u64 = 100_000;
const MAX_MAX_CHARS: u64 = 1_000_000;
/// Time allowed beyond the fetch timeout for turning a large page into markdown.
const RENDER_MARGIN: Duration = Duration::from_secs(30);

/// The `web_fetch` tool. Its HTTP client is built on first use and shared by every call.
pub struct WebFetchTool {
    spec: ToolSpec,
    settings: WebFetchSettings,
    policy: Arc<AddressPolicy>,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl WebFetchTool {
    /// The tool with the address policy its settings give.
    pub fn new(settings: WebFetchSettings) -> Result<WebFetchTool, BuildError> {
        let policy = if settings.allow_private_addresses {
            AddressPolicy::allow_private()
        } else {
            AddressPolicy::deny_private()
        };
        WebFetchTool::with_policy(settings, policy)
    }

    /// The tool with an explicit address policy (`settings.allow_private_addresses` is
    /// ignored): for embedding and for tests that need some private addresses but not others.
    pub fn with_policy(
        settings: WebFetchSettings,
        policy: AddressPolicy,
    ) -> Result<WebFetchTool, BuildError> {
        Ok(WebFetchTool {
            spec: spec(&settings)?,
            settings,
            policy: Arc::new(policy),
            client: OnceLock::new(),
        })
    }

    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .dns_resolver(Arc::new(CheckedResolver::new(self.policy.clone())))
                    .user_agent(concat!("toold-web-fetch/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|err| format!("cannot build the HTTP client: {err}"))
            })
            .as_ref()
            .map_err(|err| ToolError::Execution(err.clone()))
    }

    /// GETs `url`, following redirects by hand and checking every hop.
    async fn fetch(&self, url: &Url) -> Result<Fetched, ToolError> {
        let client = self.client()?;
        let trace_context = crate::tool::trace::current();
        let mut current = url.clone();
        let mut previous: Option<Url> = None;
        let mut redirects = 0;
        loop {
            // A refusal after a redirect says where the redirect came from.
            let hop_error = |err: ToolError| match (&previous, err) {
                (Some(from), ToolError::Execution(message)) => ToolError::Execution(format!(
                    "{message} (reached by a redirect from \"{from}\")"
                )),
                (_, err) => err,
            };
            check_url(&current, &self.policy)
                .map_err(|message| hop_error(ToolError::Execution(message)))?;
            let mut request = client.get(current.clone()).header(
                ACCEPT,
                "text/markdown, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1",
            );
            if let Some(context) = &trace_context {
                request = request.header("traceparent", context.traceparent());
                if let Some(state) = &context.tracestate {
                    request = request.header("tracestate", state);
                }
            }
            let response = request
                .send()
                .await
                .map_err(|err| hop_error(request_error(&current, &err)))?;
            let status = response.status().as_u16();
            let location = response.headers().get(LOCATION);
            if matches!(status, 301 | 302 | 303 | 307 | 308)
                && let Some(location) = location
            {
                let location = location.to_str().map_err(|_| {
                    ToolError::Execution(format!(
                        "\"{current}\" redirected to a location that is not valid text"
                    ))
                })?;
                let next = current.join(location).map_err(|err| {
                    ToolError::Execution(format!(
                        "\"{current}\" redirected to an invalid URL \"{location}\": {err}"
                    ))
                })?;
                if redirects == self.settings.max_redirects {
                    return Err(ToolError::Execution(format!(
                        "too many redirects: gave up after {redirects} (the next was to \"{next}\")"
                    )));
                }
                redirects += 1;
                previous = Some(std::mem::replace(&mut current, next));
                continue;
            }
            return self.read_response(response, current, redirects).await;
        }
    }

    async fn read_response(
        &self,
        mut response: reqwest::Response,
        url: Url,
        redirects: usize,
    ) -> Result<Fetched, ToolError> {
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(content::essence)
            .unwrap_or_default();
        let declared = content::kind_from_media_type(&content_type);
        if declared == Some(ContentKind::Binary) {
            return Err(binary_refusal(&url, &content_type));
        }
        let cap = usize::try_from(self.settings.max_body_bytes).unwrap_or(usize::MAX);
        let mut body = Vec::new();
        let mut body_truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| request_error(&url, &err))?
        {
            let room = cap - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                body_truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let kind = declared.unwrap_or_else(|| content::sniff(&body));
        if kind == ContentKind::Binary {
            return Err(binary_refusal(&url, &content_type));
        }
        Ok(Fetched {
            url,
            redirects,
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or(""),
            content_type,
            kind,
            body,
            body_truncated,
        })
    }
}

/// A response read and judged to be text.
struct Fetched {
    /// Where the body came from (after redirects).
    url: Url,
    redirects: usize,
    status: u16,
    reason: &'static str,
    content_type: String,
    kind: ContentKind,
    body: Vec<u8>,
    body_truncated: bool,
}

fn spec(settings: &WebFetchSettings) -> Result<ToolSpec, BuildError> {
    ToolSpec::builder("web_fetch")
        .alias("WebFetch")
        .description(format!(
            "Fetches a URL with an HTTP GET and returns its content as text. HTML pages are \
             converted to markdown; other text (plain text, JSON, XML, CSS, source code) is \
             returned as it is; binary content (images, PDFs, archives) is refused. Use it to \
             read a documentation page or any web resource whose full http:// or https:// URL \
             you know. Redirects are followed (at most {redirects}); the whole fetch times out \
             after {timeout} ms; bodies over {bytes} bytes are cut. The text is cut at \
             `max_chars` characters (default {DEFAULT_MAX_CHARS}); a note says when, so you can \
             ask again with a larger `max_chars`. It does not run JavaScript, send cookies or \
             log in; URLs with credentials (user:password@) are refused, and so are private, \
             loopback, link-local and cloud-metadata addresses.",
            redirects = settings.max_redirects,
            timeout = settings.timeout_ms,
            bytes = settings.max_body_bytes,
        ))
        .input_schema(json!({
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "The full http:// or https:// URL to fetch",
                    "minLength": 1,
                    "maxLength": 8192
                },
                "max_chars": {
                    "type": "integer",
                    "description": format!(
                        "Most characters of content to return (default {DEFAULT_MAX_CHARS})"
                    ),
                    "minimum": 1,
                    "maximum": MAX_MAX_CHARS
                }
            },
            "required": ["url"],
            "additionalProperties": false
        }))
        .read_only(true)
        .concurrency_safe(true)
        .destructive(false)
        .permission(PermissionLevel::ReadOnly)
        .concurrency_class(ConcurrencyClass::ReadOnly)
        .interrupt_behavior(InterruptBehavior::Cancel)
        .idempotent(true)
        .open_world(true)
        .max_result_size_chars(Some(100_000))
        .timeout(Duration::from_millis(settings.timeout_ms).saturating_add(RENDER_MARGIN))
        .build()
}

/// Parses and checks the URL the model gave.
fn input_url(input: &Value, policy: &AddressPolicy) -> Result<Url, ToolError> {
    let raw = string_field(input, "url")?;
    let url = Url::parse(raw.trim())
        .map_err(|err| ToolError::Validation(format!("\"{raw}\" is not a valid URL: {err}")))?;
    check_url(&url, policy).map_err(ToolError::Validation)?;
    Ok(url)
}

/// What every URL, given or redirected to, must satisfy before a request is sent. Host names
/// are checked later, after resolution; literal addresses never reach the resolver.
fn check_url(url: &Url, policy: &AddressPolicy) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched; \"{url}\" has scheme \"{}\"",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "URLs with credentials are refused; remove the \"user:password@\" part of \"{}\"",
            url.host_str().unwrap_or_default()
        ));
    }
    let address = match url.host() {
        None => return Err(format!("\"{url}\" has no host")),
        Some(Host::Domain(_)) => return Ok(()),
        Some(Host::Ipv4(v4)) => v4.into(),
        Some(Host::Ipv6(v6)) => v6.into(),
    };
    policy.check(address).map_err(|refused| refused.to_string())
}

/// A readable message for a failed request; an address refusal from the resolver is
/// reported as itself, however deep reqwest wrapped it.
fn request_error(url: &Url, err: &reqwest::Error) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut causes = Vec::new();
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<BlockedAddress>() {
            return ToolError::Execution(refused.to_string());
        }
        let text = cause.to_string();
        if causes.last() != Some(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    // The outermost message repeats the URL; the causes say what went wrong.
    let detail = if causes.len() > 1 {
        &causes[1..]
    } else {
        &causes[..]
    };
    ToolError::Execution(format!("fetching \"{url}\" {what}: {}", detail.join(": ")))
}

fn binary_refusal(url: &Url, content_type: &str) -> ToolError {
    let declared = if content_type.is_empty() {
        "undeclared type".to_owned()
    } else {
        content_type.to_owned()
    };
    ToolError::Execution(format!(
        "\"{url}\" is binary content ({declared}); web_fetch returns text only"
    ))
}

/// The model's view of a fetched body: a short header, the content, and notes on any cut.
async fn render(
    requested: &Url,
    fetched: Fetched,
    max_chars: usize,
    max_body_bytes: u64,
) -> Result<ToolOutput, ToolError> {
    let text = String::from_utf8_lossy(&fetched.body).into_owned();
    let text = if fetched.kind == ContentKind::Html {
        tokio::task::spawn_blocking(move || content::html_to_markdown(&text))
            .await
            .map_err(|err| ToolError::Execution(format!("converting the page failed: {err}")))?
            .map_err(ToolError::Execution)?
    } else {
        text
    };
    let total_chars = text.chars().count();
    let (shown, cut) = cut_chars(&text, max_chars);
    let mut out = format!("URL: {}\n", fetched.url);
    if fetched.redirects > 0 {
        out.push_str(&format!(
            "Redirected from: {requested} ({} redirects)\n",
            fetched.redirects
        ));
    }
    out.push_str(&format!(
        "Status: {} {}\nContent-Type: {}\n\n{shown}",
        fetched.status,
        fetched.reason,
        if fetched.content_type.is_empty() {
            "(undeclared)"
        } else {
            &fetched.content_type
        }
    ));
    if cut {
        out.push_str(&format!(
            "\n\n[content cut at {max_chars} of {total_chars} characters; fetch again with a larger max_chars (at most {MAX_MAX_CHARS}) to see more]"
        ));
    }
    if fetched.body_truncated {
        out.push_str(&format!(
            "\n\n[the response body was larger than {max_body_bytes} bytes and was cut there]"
        ));
    }
    let success = (200..300).contains(&fetched.status);
    let output = if success {
        ToolOutput::text(out)
    } else {
        ToolOutput::failure(out)
    };
    Ok(output
        .with_metadata("url", json!(requested.as_str()))
        .with_metadata("final_url", json!(fetched.url.as_str()))
        .with_metadata("status", json!(fetched.status))
        .with_metadata("content_type", json!(fetched.content_type))
        .with_metadata("bytes", json!(fetched.body.len()))
        .with_metadata("redirects", json!(fetched.redirects))
        .with_metadata("body_truncated", json!(fetched.body_truncated))
        .with_metadata("total_chars", json!(total_chars))
        .with_metadata("truncated", json!(cut)))
}

#[async_trait]
impl Tool for WebFetchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        input_url(input, &self.policy).map(drop)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let url = input_url(&input, &self.policy)?;
        let max_chars = match optional_whole_number(&input, "max_chars")? {
            Some(0) => {
                return Err(ToolError::Validation(
                    "\"max_chars\" must be at least 1".into(),
                ));
            }
            Some(n) => n.min(MAX_MAX_CHARS),
            None => super::runtime_setting_u64(&*ctx.session, MAX_CHARS_SETTING)
                .unwrap_or(DEFAULT_MAX_CHARS),
        };
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        let fetched = tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => {
                return Err(ToolError::Execution(format!("fetching \"{url}\" was cancelled")));
            }
            fetched = tokio::time::timeout(timeout, self.fetch(&url)) => fetched.map_err(|_| {
                ToolError::Timeout(format!(
                    "fetching \"{url}\" timed out after {} ms",
                    self.settings.timeout_ms
                ))
            })??,
        };
        let max_chars = usize::try_from(max_chars).unwrap_or(usize::MAX);
        render(&url, fetched, max_chars, self.settings.max_body_bytes).await
    }
}
