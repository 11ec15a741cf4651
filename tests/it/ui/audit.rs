//! The dashboard's audit view in a real browser against the real daemon: opened with its
//! filters in the URL (`/ui?audit.decision=deny`) it lists exactly the denied calls of every
//! session; a row's session link narrows the view to that session (the URL follows); a
//! filter typed into the form goes into the URL beside the others.

use std::sync::Arc;

use serde_json::json;

use super::browser::screenshot_dir;
use super::webdriver::{self, Browser};
use crate::http::harness::Toold;

const TOKEN: &str = "audit-view-token";

fn rows_are(ids: &[&str]) -> String {
    let expected = serde_json::to_string(ids).unwrap();
    format!(
        "return JSON.stringify([...document.querySelectorAll('#audit tbody tr')]\
         .map((tr) => tr.dataset.callId)) === '{expected}';"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_view_keeps_its_filters_in_the_url_and_links_a_call_to_its_session() {
    if !webdriver::available() {
        return;
    }
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, "[permissions]\ndeny = [\"bash(rm:*)\"]\n").unwrap();
    let config = config.to_str().unwrap().to_owned();
    let toold = Toold::start_with(dir, &["--config", &config, "--auth-token", TOKEN]);
    let one = toold.session().await;
    let two = toold.session().await;
    let calls = |prefix: &str| {
        json!([
            {"id": format!("{prefix}-ok"), "name": "bash", "input": {"command": "echo hi"}},
            {"id": format!("{prefix}-no"), "name": "bash", "input": {"command": "rm -rf x"}},
        ])
    };
    toold.run_batch(&one, calls("one")).await;
    toold.run_batch(&two, calls("two")).await;

    let browser = Browser::start(screenshot_dir()).await;
    browser
        .goto(&format!("{}/ui?audit.decision=deny", toold.base))
        .await;
    browser
        .wait_for(
            "the login form",
            "return !document.getElementById('login').hidden;",
        )
        .await;
    browser.type_into("#login-token", TOKEN).await;
    browser.click("#login-submit").await;
    browser
        .wait_for(
            "the denied calls of both sessions",
            &rows_are(&["two-no", "one-no"]),
        )
        .await;
    browser.screenshot("audit-01-denied").await;

    // The older denial's session link: that session's calls, every decision.
    browser
        .click("#audit tbody tr[data-call-id='one-no'] a.audit-session")
        .await;
    browser
        .wait_for("session one's calls", &rows_are(&["one-no", "one-ok"]))
        .await;
    let url = browser.current_url().await;
    assert!(url.contains(&format!("audit.session={one}")), "{url}");
    assert!(!url.contains("audit.decision"), "{url}");

    // A tool typed into the form joins the session in the URL.
    browser
        .type_into("#audit-filters input[name='tool']", "glob_search")
        .await;
    browser.click("#audit-apply").await;
    browser
        .wait_for(
            "no glob_search calls",
            "return document.getElementById('audit-note').textContent === 'no calls match';",
        )
        .await;
    let url = browser.current_url().await;
    assert!(
        url.contains("audit.tool=glob_search") && url.contains("audit.session="),
        "{url}"
    );
    browser.screenshot("audit-02-filtered").await;
}
