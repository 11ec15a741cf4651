//! A real browser for the dashboard test: Debian's `chromium`, headless, driven by its
//! `chromedriver` over the W3C WebDriver protocol (plain JSON over HTTP, spoken with reqwest;
//! no client library). [`Browser::wait_for`] is the only way a test waits: it polls a
//! condition in the page until it holds (30 s guard), never sleeps for a fixed time.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

/// The browser and its driver, as Debian installs them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long a condition may take to hold.
const WAIT: Duration = Duration::from_secs(30);

/// Whether the browser and its driver are installed; when they are not, the test is skipped
/// on a developer's machine and fails in CI (`CI` set), where `.ci/run` installs them.
pub fn available() -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        crate::support::skip_unless_ci(&format!("{CHROMIUM} or {CHROMEDRIVER} is not installed"));
    }
    present
}

/// A chromedriver process and one browser session in it; both end when this is dropped.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    screenshots: PathBuf,
    _profile: tempfile::TempDir,
    /// One browser at a time in this test binary: two chromedrivers starting together on
    /// this 2-core machine were seen to exit before listening (CI, 2026-12-03).
    _alone: tokio::sync::MutexGuard<'static, ()>,
}

static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Browser {
    /// Starts chromedriver on a free port and a headless chromium window of 1400×1000;
    /// screenshots go to `screenshots`.
    pub async fn start(screenshots: PathBuf) -> Browser {
        let alone = ONE_BROWSER.lock().await;
        // A process group of its own: chromium and its helpers are in it, and go with it.
        // Started again (three tries) if it exits before it listens.
        let mut tries = 0;
        let (driver, port) = loop {
            tries += 1;
            let mut driver = Command::new(CHROMEDRIVER)
                .arg("--port=0")
                .process_group(0)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts");
            match read_port(&mut driver) {
                Some(port) => break (driver, port),
                None if tries < 3 => {
                    let _ = driver.kill();
                    let _ = driver.wait();
                }
                None => panic!("chromedriver exited before listening, {tries} times"),
            }
        };
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                         format!("--user-data-dir={}", profile.path().display())],
            },
        }}});
        let client = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let answer = post(&client, &format!("{base}/session"), &capabilities).await;
        let session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {answer}"))
            .to_owned();
        std::fs::create_dir_all(&screenshots).unwrap();
        Browser {
            driver,
            base,
            session,
            client,
            screenshots,
            _profile: profile,
            _alone: alone,
        }
    }

    async fn command(&self, path: &str, body: &Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        post(&self.client, &url, body).await
    }

    /// Resizes the window to `width`×`height` CSS pixels.
    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.command("/window/rect", &json!({"width": width, "height": height}))
            .await;
    }

    pub async fn goto(&self, url: &str) {
        self.command("/url", &json!({"url": url})).await;
    }

    pub async fn current_url(&self) -> String {
        let url = format!("{}/session/{}/url", self.base, self.session);
        let answer = get(&self.client, &url).await;
        answer.as_str().unwrap().to_owned()
    }

    /// The element matching a CSS selector (which must exist).
    pub async fn find(&self, selector: &str) -> String {
        let answer = self
            .command(
                "/element",
                &json!({"using": "css selector", "value": selector}),
            )
            .await;
        answer
            .as_object()
            .and_then(|element| element.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {selector}: {answer}"))
            .to_owned()
    }

    /// A real click (the driver moves the pointer to the element and presses).
    pub async fn click(&self, selector: &str) {
        let element = self.find(selector).await;
        self.command(&format!("/element/{element}/click"), &json!({}))
            .await;
    }

    /// Types `text` into the element, key by key.
    pub async fn type_into(&self, selector: &str, text: &str) {
        let element = self.find(selector).await;
        self.command(&format!("/element/{element}/value"), &json!({"text": text}))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page; its return value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.command("/execute/sync", &json!({"script": script, "args": args}))
            .await
    }

    /// Waits until `script` returns a truthy value (`describe` says what is awaited); that
    /// value.
    pub async fn wait_for(&self, describe: &str, script: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let value = self.eval(script, json!([])).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return value;
            }
            if tokio::time::Instant::now() > deadline {
                self.screenshot("timeout").await;
                panic!("timed out waiting for {describe} (last value {value})");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Saves a PNG of the window as `NAME.png`; its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let url = format!("{}/session/{}/screenshot", self.base, self.session);
        let answer = get(&self.client, &url).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(answer.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = self.screenshots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Killing chromedriver alone leaves its chromium running (twenty processes after each
        // run): the whole group goes.
        if let Ok(group) = i32::try_from(self.driver.id()) {
            // SAFETY: kill(2) on the driver's process group.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The port from chromedriver's "ChromeDriver was started successfully on port N." line;
/// `None` when it exits first.
fn read_port(driver: &mut Child) -> Option<u16> {
    let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split("started successfully on port ").nth(1) {
            // Whatever it prints later is read and dropped, so it never writes to a closed pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return Some(rest.trim_end_matches('.').trim().parse().unwrap());
        }
    }
    None
}

/// A WebDriver answer's `value`; an `error` in it fails the test with the driver's message.
async fn answer(response: reqwest::Response) -> Value {
    let bytes = response.bytes().await.expect("a WebDriver answer");
    let body: Value = serde_json::from_slice(&bytes).expect("a WebDriver answer in JSON");
    let value = body["value"].clone();
    if let Some(error) = value.get("error") {
        panic!("WebDriver error {error}: {}", value["message"]);
    }
    value
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> Value {
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap());
    answer(request.send().await.expect("chromedriver answers")).await
}

async fn get(client: &reqwest::Client, url: &str) -> Value {
    answer(client.get(url).send().await.expect("chromedriver answers")).await
}
