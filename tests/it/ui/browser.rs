//! The dashboard in a real browser (headless Debian chromium through chromedriver) against
//! the real daemon with a token and an `ask` rule: log in, watch a batch's rows appear while
//! it waits for a person, filter by tool (the URL follows), allow the approval with a click
//! (the batch then completes), open a call's details (a tool output holding markup stays
//! text), and survive a restart of the daemon (the badge shows, then the tail resumes with
//! every seq exactly once), then hold the newest of over 12 000 events with a few dozen rows
//! in the DOM. Screenshots go to `TARGET/ui-screenshots/`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::webdriver::{self, Browser};
use crate::http::harness::Toold;

const TOKEN: &str = "dashboard-test-token";
const XSS: &str = "<img src=x onerror=\"document.title='owned'\">";
const CONFIG: &str = "[permissions]\nask = [\"write_file\"]\napproval_timeout_ms = 120000\n";

/// `TARGET/ui-screenshots`, beside the test binary's `debug/`.
pub(crate) fn screenshot_dir() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_toold"));
    binary
        .parent()
        .and_then(|debug| debug.parent())
        .map_or_else(
            || PathBuf::from("ui-screenshots"),
            |target| target.join("ui-screenshots"),
        )
}

fn flags(config: &str) -> Vec<String> {
    ["--config", config, "--auth-token", TOKEN]
        .iter()
        .map(|flag| (*flag).to_owned())
        .collect()
}

fn badge_is(status: &str) -> String {
    format!("return document.getElementById('connection').textContent === '{status}';")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    if !webdriver::available() {
        return;
    }
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let flags = flags(config.to_str().unwrap());
    let flag_refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    let toold = Toold::start_with(dir.clone(), &flag_refs);
    let browser = Browser::start(screenshot_dir()).await;
    let mut shots = Vec::new();

    // Log in: the page loads without a token and asks for one.
    browser.goto(&format!("{}/ui", toold.base)).await;
    browser
        .wait_for(
            "the login form",
            "return !document.getElementById('login').hidden;",
        )
        .await;
    // A wrong token is refused in the form; the right one opens the dashboard.
    browser.type_into("#login-token", "wrong").await;
    browser.click("#login-submit").await;
    browser
        .wait_for(
            "the refusal",
            "return document.getElementById('login-error').textContent.includes('refused');",
        )
        .await;
    shots.push(browser.screenshot("01-login").await);
    browser
        .type_into("#login-token", &"\u{E003}".repeat(5))
        .await;
    browser.type_into("#login-token", TOKEN).await;
    browser.click("#login-submit").await;
    browser.wait_for("the live badge", &badge_is("live")).await;
    let sign_out = browser
        .eval(
            "return document.getElementById('logout').offsetParent !== null;",
            json!([]),
        )
        .await;
    assert_eq!(sign_out, json!(true), "with auth, Sign out shows");
    assert!(
        !browser.current_url().await.contains(TOKEN),
        "the token never goes into the URL"
    );

    // A batch whose third call waits for a person: the first two calls' rows appear while it
    // runs, and the approval shows with its buttons.
    let session = toold
        .session_with(&json!({"interactive": true, "permission_mode": "workspace_write"}))
        .await;
    std::fs::write(toold.workspace(&session).await.join("xss.txt"), XSS).unwrap();
    let batch = spawn_batch(&toold, &session);
    let text = browser
        .wait_for(
            "the rows of the first two calls",
            "const rows = [...document.querySelectorAll('#tail .vlist-row')];
             const post = rows.some(r => r.classList.contains('type-tool-post') && r.textContent.includes('read_file'));
             const error = rows.find(r => r.classList.contains('type-tool-error'));
             return post && error ? error.textContent : null;",
        )
        .await;
    assert!(
        text.as_str().unwrap().contains("<img"),
        "the error's output is shown as text: {text}"
    );
    browser
        .wait_for(
            "the pending approval",
            "return document.querySelectorAll('#approvals tbody tr').length === 1
                 && document.getElementById('tile-approvals').textContent === '1';",
        )
        .await;
    // The tiles and the per-tool table count the two outcomes (one of them an error).
    browser
        .wait_for(
            "the tiles and the tools table",
            "const row = document.querySelector('#tools tr[data-tool=\"read_file\"]');
             return row && row.cells[1].textContent === '2' && row.cells[2].textContent === '1'
                 && document.getElementById('tile-rate').textContent === '2'
                 && document.getElementById('tile-errors').textContent === '50.0%';",
        )
        .await;
    assert!(!batch.is_finished(), "the batch waits for the approval");
    no_markup_ran(&browser).await;
    shots.push(browser.screenshot("02-batch-waiting-for-approval").await);

    // Filter by tool: the URL carries the filter, and only that tool's rows remain.
    browser.type_into("#filter-tool", "read_file").await;
    browser
        .wait_for(
            "only read_file rows",
            "const rows = [...document.querySelectorAll('#tail .vlist-row .c-tool')];
             return rows.length >= 2 && rows.every(c => c.textContent === 'read_file');",
        )
        .await;
    let url = browser.current_url().await;
    assert!(
        url.contains("tool=read_file"),
        "the filter is in the URL: {url}"
    );
    shots.push(browser.screenshot("03-filtered-by-tool").await);

    // Allow with a click: the batch completes, as the API confirms.
    browser.click("#approvals tbody tr .decide-allow").await;
    let reply = tokio::time::timeout(Duration::from_secs(30), batch)
        .await
        .expect("the batch completes once allowed")
        .unwrap();
    let batch_id = reply["batch_id"].as_str().unwrap();
    let results = reply["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[2]["is_error"], false, "{}", results[2]);
    let stored = toold
        .get(&format!("/v1/sessions/{session}/batches/{batch_id}"))
        .await;
    assert_eq!(stored.body["status"], "completed", "{}", stored.body);
    browser
        .wait_for(
            "no pending approval",
            "return document.getElementById('tile-approvals').textContent === '0';",
        )
        .await;
    shots.push(browser.screenshot("04-approved").await);

    // A call's details: the output holding markup is text, the decision and who made it.
    let details = open_details(&browser, "c1").await;
    assert!(
        details["output"].as_str().unwrap().contains(XSS),
        "{details}"
    );
    assert!(
        details["input"].as_str().unwrap().contains("xss.txt"),
        "{details}"
    );
    assert!(
        details["decision"]
            .as_str()
            .unwrap()
            .starts_with("allow by mode"),
        "{details}"
    );
    assert!(
        details["duration"].as_str().unwrap().ends_with(" ms"),
        "{details}"
    );
    assert!(
        !details["trace id"].as_str().unwrap().is_empty(),
        "{details}"
    );
    no_markup_ran(&browser).await;
    shots.push(browser.screenshot("05-call-details").await);
    // Backspaces, as a person would delete the filter ("read_file" is nine characters).
    browser
        .type_into("#filter-tool", &"\u{E003}".repeat(9))
        .await;
    browser
        .wait_for(
            "the filter cleared",
            "return !location.search.includes('tool=');",
        )
        .await;
    let details = open_details(&browser, "c3").await;
    let decision = details["decision"].as_str().unwrap();
    assert!(decision.starts_with("allow by http"), "{details}");
    assert!(decision.contains("rule write_file"), "{details}");
    shots.push(browser.screenshot("06-approved-call-details").await);
    shots.push(offloaded_result(&toold, &browser, &session).await);

    // A restart: the badge shows while the daemon is away; then the tail resumes from the
    // last seq it had, and holds every stored seq exactly once.
    toold.signal_terminate();
    let mut stopped = toold;
    assert!(stopped.wait().success());
    browser
        .wait_for("the reconnecting badge", &badge_is("reconnecting"))
        .await;
    shots.push(browser.screenshot("08-reconnecting").await);
    let toold = stopped.start_again(&flag_refs);
    browser
        .wait_for("the live badge again", &badge_is("live"))
        .await;
    let read = json!([{"id": "after", "name": "read_file", "input": {"file_path": "xss.txt"}}]);
    toold.run_batch(&session, read).await;
    browser
        .wait_for(
            "the new batch's result",
            "return [...document.querySelectorAll('#tail .vlist-row')].some(r =>
                 r.classList.contains('type-tool-post') && r.querySelector('.c-summary').textContent.startsWith('after '));",
        )
        .await;
    shots.push(browser.screenshot("09-resumed-after-restart").await);
    let held = held_seqs(&browser).await;
    let stored = stored_seqs(&toold, held[0] - 1, *held.last().unwrap()).await;
    assert_eq!(
        held, stored,
        "the tail holds every stored event once, in order"
    );
    assert!(
        held.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "no gap: {held:?}"
    );
    paused(&toold, &browser, &session).await;
    shots.push(ten_thousand_events(&toold, &browser, &session).await);
    for shot in &shots {
        eprintln!("screenshot: {}", shot.display());
    }
}

/// Reads `xss.txt` (c1), a file named after markup that does not exist (c2, an error whose
/// output names it), and writes a file (c3, which the `ask` rule holds for a person).
fn spawn_batch(toold: &Toold, session: &str) -> tokio::task::JoinHandle<Value> {
    let body = json!({"calls": [
        {"id": "c1", "name": "read_file", "input": {"file_path": "xss.txt"}},
        {"id": "c2", "name": "read_file", "input": {"file_path": format!("{XSS}.txt")}},
        {"id": "c3", "name": "write_file", "input": {"file_path": "out.txt", "content": "approved\n"}},
    ]});
    let request = toold
        .client
        .post(format!("{}/v1/sessions/{session}/batches", toold.base))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap());
    tokio::spawn(async move {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    })
}

/// Clicks the `tool:post`/`tool:error` row of `call` and waits for its details; each field's
/// text by name.
async fn open_details(browser: &Browser, call: &str) -> Value {
    let selector = browser
        .wait_for(
            &format!("the outcome row of {call}"),
            &format!(
                "const row = [...document.querySelectorAll('#tail .vlist-row')].find(r =>
                     (r.classList.contains('type-tool-post') || r.classList.contains('type-tool-error'))
                     && r.querySelector('.c-summary').textContent.startsWith('{call} '));
                 return row ? `#tail .vlist-row[data-seq=\"${{row.dataset.seq}}\"]` : null;"
            ),
        )
        .await;
    browser.click(selector.as_str().unwrap()).await;
    browser
        .wait_for(
            &format!("the details of {call}"),
            &format!(
                "const panel = document.getElementById('details');
                 if (panel.hidden || panel.dataset.state !== 'loaded' || panel.dataset.call !== '{call}') return null;
                 return Object.fromEntries([...panel.querySelectorAll('dd[data-field]')]
                     .map(dd => [dd.dataset.field, dd.textContent]));"
            ),
        )
        .await
}

/// The markup in tool outputs stayed text: no image element exists and its handler never ran.
async fn no_markup_ran(browser: &Browser) {
    let state = browser
        .eval(
            "return {images: document.querySelectorAll('img').length, title: document.title};",
            json!([]),
        )
        .await;
    assert_eq!(state, json!({"images": 0, "title": "toold dashboard"}));
}

/// The seqs of every stored event in `(after, until]`, read back through `/v1/events`.
async fn stored_seqs(toold: &Toold, after: u64, until: u64) -> Vec<u64> {
    let mut stream = toold.sse("/v1/events", None, Some(after)).await;
    let mut seqs = Vec::new();
    while seqs.last().is_none_or(|last| *last < until) {
        let frame = stream.next().await.expect("the stream goes on");
        if let Some(seq) = frame.data["seq"].as_u64() {
            seqs.push(seq);
        }
    }
    seqs
}

/// 40 batches of 100 calls (12 080 events) as fast as the daemon runs them: the tail holds
/// at most 10 000 of them, all contiguous with the store's, renders a few dozen rows, and
/// shows the oldest it holds when scrolled to the top. Returns the screenshot.
async fn ten_thousand_events(toold: &Toold, browser: &Browser, session: &str) -> PathBuf {
    let calls: Vec<Value> = (0..100)
        .map(|i| json!({"id": format!("r{i}"), "name": "read_file", "input": {"file_path": "xss.txt"}}))
        .collect();
    let mut last_batch = String::new();
    for _ in 0..40 {
        let reply = toold.run_batch(session, json!(calls)).await;
        last_batch = reply["batch_id"].as_str().unwrap().to_owned();
    }
    browser
        .wait_for(
            "the last batch's end",
            &format!(
                "return [...document.querySelectorAll('#tail .vlist-row.type-batch-end .c-summary')]
                     .some(cell => cell.textContent.startsWith('{last_batch} '));"
            ),
        )
        .await;
    let held = held_seqs(browser).await;
    assert!((9000..=10_000).contains(&held.len()), "{} held", held.len());
    let stored = stored_seqs(toold, held[0] - 1, *held.last().unwrap()).await;
    assert!(
        held == stored,
        "the tail holds the newest stored events, each once"
    );
    let rendered = browser
        .eval(
            "return document.querySelectorAll('#tail .vlist-row').length;",
            json!([]),
        )
        .await;
    assert!(
        rendered.as_u64().unwrap() < 100,
        "{rendered} rows in the DOM"
    );
    let screenshot = browser.screenshot("10-ten-thousand-events").await;
    browser
        .eval("document.getElementById('tail').scrollTop = 0;", json!([]))
        .await;
    browser
        .wait_for(
            "the oldest held event at the top",
            &format!(
                "const first = document.querySelector('#tail .vlist-row');
                 return first && first.dataset.seq === '{}';",
                held[0]
            ),
        )
        .await;
    // A reload with filters in the URL: the token is still in the tab (no login), and the
    // tail opens with the stored events among the newest 10 000 seqs.
    let newest = *held.last().unwrap();
    let reload = std::time::Instant::now();
    browser
        .goto(&format!(
            "{}/ui?type=batch:end&session={session}",
            toold.base
        ))
        .await;
    browser
        .wait_for("live after a reload", &badge_is("live"))
        .await;
    browser
        .wait_for(
            "the history replayed",
            &format!("return window.tooldDashboard.seqs().at(-1) === {newest};"),
        )
        .await;
    // The filters came from the URL: only this session's batch ends are shown.
    let filters = browser
        .wait_for(
            "the filtered rows",
            "const rows = [...document.querySelectorAll('#tail .vlist-row')];
             return rows.length > 0 && [document.getElementById('filter-type').value,
                     document.getElementById('filter-session').value,
                     rows.every(r => r.classList.contains('type-batch-end'))];",
        )
        .await;
    assert_eq!(filters, json!(["batch:end", session, true]));
    // A figure for docs/performance.md: the page loaded and 10 000 events replayed and shown.
    eprintln!(
        "reload with 10 000 events replayed: {} ms; {rendered} rows in the DOM",
        reload.elapsed().as_millis()
    );
    assert_eq!(
        held_seqs(browser).await,
        (newest - 9999..=newest).collect::<Vec<_>>()
    );
    screenshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_the_dashboard_needs_no_login() {
    if !webdriver::available() {
        return;
    }
    let toold = Toold::start();
    let browser = Browser::start(screenshot_dir()).await;
    browser.goto(&format!("{}/ui", toold.base)).await;
    browser.wait_for("the live badge", &badge_is("live")).await;
    let login_hidden = browser
        .eval("return document.getElementById('login').hidden;", json!([]))
        .await;
    assert_eq!(login_hidden, json!(true));
    let session = toold.session().await;
    browser
        .wait_for(
            "the new session in the table",
            &format!(
                "return !!document.querySelector('#sessions tr[data-session=\"{session}\"]');"
            ),
        )
        .await;
}

/// Paused, the tail keeps receiving (the page holds the events) but shows no new row;
/// resumed, it shows them.
async fn paused(toold: &Toold, browser: &Browser, session: &str) {
    browser.click("#pause").await;
    let before = held_seqs(browser).await.len();
    let read =
        json!([{"id": "while-paused", "name": "read_file", "input": {"file_path": "xss.txt"}}]);
    toold.run_batch(session, read).await;
    // batch:start, tool:queued, tool:pre, tool:post, batch:end.
    browser
        .wait_for(
            "the events held while paused",
            &format!(
                "return window.tooldDashboard.seqs().length === {};",
                before + 5
            ),
        )
        .await;
    let shown = "return [...document.querySelectorAll('#tail .vlist-row .c-summary')]
                     .some(cell => cell.textContent.startsWith('while-paused '));";
    assert_eq!(browser.eval(shown, json!([])).await, json!(false));
    let label = browser
        .eval(
            "return document.getElementById('tail-count').textContent;",
            json!([]),
        )
        .await;
    assert!(label.as_str().unwrap().ends_with("(paused)"), "{label}");
    browser.click("#pause").await;
    browser.wait_for("the rows after resuming", shown).await;
}

/// The seqs the tail holds, in order.
async fn held_seqs(browser: &Browser) -> Vec<u64> {
    let seqs = browser
        .eval("return window.tooldDashboard.seqs();", json!([]))
        .await;
    serde_json::from_value(seqs).unwrap()
}

/// A grep whose 2 000 matching lines are offloaded: the details show the preview and link to
/// the whole result, which a click reads from `/v1/results/{id}`. Returns the screenshot.
async fn offloaded_result(toold: &Toold, browser: &Browser, session: &str) -> PathBuf {
    let lines: String = (0..2000).map(|i| format!("needle {i:04}\n")).collect();
    std::fs::write(toold.workspace(session).await.join("big.txt"), lines).unwrap();
    let input = json!({"pattern": "needle", "output_mode": "content", "head_limit": 0});
    let calls = json!([{"id": "big", "name": "grep_search", "input": input}]);
    let reply = toold.run_batch(session, calls).await;
    let result_id = reply["results"][0]["offloaded"]["result_id"]
        .as_str()
        .unwrap_or_else(|| panic!("offloaded: {reply}"))
        .to_owned();
    let details = open_details(browser, "big").await;
    assert!(
        details["full result"]
            .as_str()
            .unwrap()
            .contains(&result_id),
        "{details}"
    );
    assert!(
        !details["output"].as_str().unwrap().contains("needle 1999"),
        "a preview"
    );
    browser.click("#details .full-result").await;
    browser
        .wait_for(
            "the whole result",
            "const pres = document.querySelectorAll('#details pre.output');
             return pres.length === 2 && pres[1].textContent.includes('needle 1999');",
        )
        .await;
    browser.screenshot("07-offloaded-result").await
}
