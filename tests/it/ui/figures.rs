//! What the dashboard's figures mean, in a real browser 800 px wide against a daemon with no
//! auth (issue 35): a pending approval shows its whole input (the command, then the path,
//! first); a bash call that waited 5 s for a person keeps that wait out of the bash p95 and
//! shows it apart; calls to tools that do not exist are one row; a normal `session:end` is
//! not red and an error is; the chart of calls per minute has the calls as data; no "Sign
//! out" without auth; and nothing is wider than the window. Screenshots go to
//! `TARGET/ui-screenshots/` (`11-…` to `14-…`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::browser::screenshot_dir;
use super::webdriver::{self, Browser};
use crate::http::harness::Toold;

const CONFIG: &str = "[permissions]\napproval_timeout_ms = 120000\n";

/// How long the test leaves the bash call waiting for a person.
const APPROVAL_WAIT: Duration = Duration::from_secs(5);

/// The error colour of the page (`--bad` in app.css), as computed styles give it.
const RED: &str = "rgb(192, 57, 43)";

const NO_HORIZONTAL_SCROLL: &str =
    "return [document.documentElement.scrollWidth, window.innerWidth];";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_at_800_px_shows_what_is_approved_and_latency_without_the_wait() {
    if !webdriver::available() {
        return;
    }
    let toold = Toold::start_with_config(CONFIG);
    let browser = Browser::start(screenshot_dir()).await;
    browser.set_window_size(800, 1000).await;
    browser.goto(&format!("{}/ui", toold.base)).await;
    browser
        .wait_for(
            "the live badge",
            "return document.getElementById('connection').textContent === 'live';",
        )
        .await;
    let width = browser.eval("return window.innerWidth;", json!([])).await;
    assert!(
        width.as_u64().unwrap() <= 800,
        "the window is 800 px wide: {width}"
    );
    let sign_out = browser
        .eval(
            "const b = document.getElementById('logout'); return !!b && b.offsetParent !== null;",
            json!([]),
        )
        .await;
    assert_eq!(sign_out, json!(false), "no Sign out without auth");

    // The chart's frame is drawn before any call.
    browser
        .wait_for(
            "the empty chart's axis",
            "return [...document.querySelectorAll('#chart text')].map(t => t.textContent).join('|') === '1 / min|60 min ago|now';",
        )
        .await;

    // A session whose bash and write_file calls ask a person, and one whose calls do not.
    let asking = toold
        .session_with(
            &json!({"interactive": true, "permission_mode": "workspace_write",
                              "rules": {"ask": ["bash", "write_file"]}}),
        )
        .await;
    let normal = toold
        .session_with(&json!({"permission_mode": "workspace_write"}))
        .await;
    let words: Vec<String> = (0..60).map(|i| format!("line{i:02}")).collect();
    let command = format!(
        "mkdir -p reports/2026 && printf '%s\\n' '{}' > reports/2026/approved-output.txt",
        words.join(" ")
    );
    let content: String = (0..200)
        .map(|i| format!("row {i:03} of the approved report\n"))
        .collect();
    let calls = json!([
        {"id": "b1", "name": "bash", "input": {"command": command, "description": "writes the approved report"}},
        {"id": "w1", "name": "write_file", "input": {"content": content, "file_path": "reports/summary.txt"}},
    ]);
    let batch = spawn_batch(&toold, &asking, calls);

    // The bash approval: its whole command, first, then the rest of the input.
    let shown = pending_approval(&browser, "bash").await;
    assert_eq!(shown["first"], "command", "{shown}");
    let text = shown["text"].as_str().unwrap();
    assert!(
        text.contains(&command),
        "the whole command is shown: {text}"
    );
    assert!(text.contains("writes the approved report"), "{text}");
    assert!(shown["fits"].as_bool().unwrap(), "nothing cut: {shown}");
    fits_the_window(&browser).await;
    browser.screenshot("11-approval-whole-command").await;
    // A person takes 5 s to answer.
    tokio::time::sleep(APPROVAL_WAIT).await;
    browser.click("#approvals tbody tr .decide-allow").await;

    // The write_file approval: the path first although `content` sorts before it, and all
    // of the content.
    let shown = pending_approval(&browser, "write_file").await;
    assert_eq!(shown["first"], "file_path", "{shown}");
    let text = shown["text"].as_str().unwrap();
    assert!(text.contains("reports/summary.txt"), "{text}");
    assert!(
        text.contains("row 000 of") && text.contains("row 199 of the approved report"),
        "the whole content"
    );
    assert!(shown["fits"].as_bool().unwrap(), "nothing cut: {shown}");
    fits_the_window(&browser).await;
    browser.screenshot("12-approval-whole-file").await;
    browser.click("#approvals tbody tr .decide-allow").await;
    let reply = tokio::time::timeout(Duration::from_secs(30), batch)
        .await
        .expect("the batch completes once allowed")
        .unwrap();
    for result in reply["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], false, "{result}");
    }
    // The daemon's own duration of the bash call includes the wait.
    let rows = toold.get(&format!("/v1/calls?session={asking}")).await;
    let b1 = rows.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["call_id"] == "b1")
        .unwrap_or_else(|| panic!("b1's audit row: {}", rows.body))
        .clone();
    let total_ms = b1["duration_ms"].as_f64().unwrap();
    assert!(
        total_ms >= 5000.0,
        "the call's duration holds the wait: {b1}"
    );

    // Ordinary calls: four bash commands, a read that fails, two tools that do not exist.
    let mut calls: Vec<Value> = (0..4)
        .map(|i| json!({"id": format!("e{i}"), "name": "bash", "input": {"command": format!("echo {i}")}}))
        .collect();
    calls.push(json!({"id": "missing", "name": "read_file", "input": {"file_path": "absent.txt"}}));
    calls.push(json!({"id": "u1", "name": "no_such_tool", "input": {}}));
    calls.push(json!({"id": "u2", "name": "made_up_tool", "input": {"x": 1}}));
    let reply = toold.run_batch(&normal, json!(calls)).await;
    let kinds: Vec<&Value> = reply["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["error_kind"])
        .collect();
    assert_eq!(kinds[5], "unknown_tool", "{reply}");
    let closed = toold.delete(&format!("/v1/sessions/{normal}")).await;
    assert!(closed.status.is_success(), "{}", closed.body);

    // The bash row: five calls, one asked; p95 well below the 5 s wait, the wait apart.
    let bash = browser
        .wait_for(
            "the bash row with five calls",
            "const row = document.querySelector('#tools tr[data-tool=\"bash\"]');
             return row && row.cells[1].textContent === '5' ? [...row.cells].map(c => c.textContent) : null;",
        )
        .await;
    let number = |i: usize| bash[i].as_str().unwrap().parse::<f64>().unwrap();
    let (p95, asked, wait_p95) = (number(4), number(5), number(6));
    eprintln!(
        "bash: total of the approved call {total_ms:.0} ms; p95 shown {p95} ms; approval wait p95 {wait_p95} ms"
    );
    assert!(p95 < 2500.0, "bash p95 without the approval wait: {bash}");
    assert_eq!(asked, 1.0, "{bash}");
    assert!(wait_p95 >= 5000.0, "the wait shown apart: {bash}");

    // The tools that do not exist: one row, counting both.
    let unknown = browser
        .wait_for(
            "the unknown tools row",
            "const row = document.querySelector('#tools tr[data-tool=\"(unknown)\"]');
             return row && [...row.cells].slice(0, 3).map(c => c.textContent);",
        )
        .await;
    assert_eq!(unknown, json!(["unknown tools (2 names)", "2", "2"]));
    let rows = browser
        .eval(
            "return [...document.querySelectorAll('#tools tbody tr')].map(r => r.dataset.tool);",
            json!([]),
        )
        .await;
    assert_eq!(
        rows,
        json!(["bash", "read_file", "write_file", "(unknown)"])
    );

    // Colours: the session's normal end is not red; a failed call is.
    let colours = browser
        .wait_for(
            "the session:end row",
            "const rows = [...document.querySelectorAll('#tail .vlist-row')];
             const end = rows.find(r => r.classList.contains('type-session-end'));
             const failed = rows.find(r => r.classList.contains('type-tool-error'));
             if (!end || !failed) return null;
             const colour = r => getComputedStyle(r.querySelector('.c-type')).color;
             return {end: colour(end), end_class: end.className, failed: colour(failed)};",
        )
        .await;
    assert_ne!(colours["end"], RED, "{colours}");
    assert!(
        colours["end_class"]
            .as_str()
            .unwrap()
            .contains("sev-neutral"),
        "{colours}"
    );
    assert_eq!(colours["failed"], RED, "{colours}");

    // The chart: nine calls and three errors, as bars.
    let chart = browser
        .wait_for(
            "the chart's bars",
            "const sum = kind => [...document.querySelectorAll(`#chart rect.${kind}`)]
                 .reduce((n, r) => n + Number(r.getAttribute('data-count')), 0);
             const calls = sum('calls');
             return calls === 9 ? [calls, sum('errors'), document.querySelectorAll('#chart rect').length] : null;",
        )
        .await;
    assert_eq!(chart[1], 3, "{chart}");
    let height = browser
        .eval(
            "return document.getElementById('chart').getBoundingClientRect().height;",
            json!([]),
        )
        .await;
    assert!(
        height.as_f64().unwrap() > 40.0,
        "the chart is drawn: {height}"
    );
    fits_the_window(&browser).await;
    browser.screenshot("13-latency-chart-800px").await;
    browser
        .eval("window.scrollTo(0, document.body.scrollHeight);", json!([]))
        .await;
    browser.screenshot("14-tail-800px").await;
}

/// Posts `calls` as one batch in `session` without waiting; the answer's body.
fn spawn_batch(toold: &Toold, session: &str, calls: Value) -> tokio::task::JoinHandle<Value> {
    let request = toold
        .client
        .post(format!("{}/v1/sessions/{session}/batches", toold.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"calls": calls})).unwrap());
    tokio::spawn(async move {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    })
}

/// The one pending approval, once it is for `tool`: its first input field, its input's
/// visible text, and whether the cell shows all of it (nothing scrolled away or clipped).
async fn pending_approval(browser: &Browser, tool: &str) -> Value {
    browser
        .wait_for(
            &format!("the {tool} approval"),
            &format!(
                "const rows = document.querySelectorAll('#approvals tbody tr');
                 if (rows.length !== 1 || rows[0].cells[1].textContent !== '{tool}') return null;
                 const cell = rows[0].querySelector('.approval-input');
                 const lead = cell.querySelector('.lead');
                 const edge = cell.getBoundingClientRect().right + 1;
                 const cut = [...cell.querySelectorAll('code, pre')].filter(n =>
                     n.scrollWidth > n.clientWidth + 1 || n.scrollHeight > n.clientHeight + 1
                     || n.getBoundingClientRect().right > edge)
                     .map(n => [n.tagName, n.scrollWidth, n.clientWidth, n.scrollHeight, n.clientHeight,
                                n.getBoundingClientRect().right, edge]);
                 return {{first: lead && lead.dataset.field, text: cell.innerText, fits: cut.length === 0, cut}};"
            ),
        )
        .await
}

/// No horizontal scroll: the page is no wider than the window.
async fn fits_the_window(browser: &Browser) {
    let sizes = browser.eval(NO_HORIZONTAL_SCROLL, json!([])).await;
    assert!(
        sizes[0].as_u64().unwrap() <= sizes[1].as_u64().unwrap(),
        "scrollWidth, innerWidth: {sizes}"
    );
}
