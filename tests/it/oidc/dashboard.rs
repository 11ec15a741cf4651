//! The dashboard (`/ui`) in a real browser with a pasted access token: the login form takes
//! an agent's provider-issued token, the live view opens, and the sessions table shows that
//! agent's session and not another agent's (the page's API requests carry the token, and the
//! gate enforces its role as for any caller). A refused token keeps the form up.

use serde_json::json;

use super::setup;
use crate::auth::session_of;
use crate::ui::browser::screenshot_dir;
use crate::ui::webdriver::{self, Browser};

fn row_of(session: &str) -> String {
    format!("return !!document.querySelector('#sessions tr[data-session=\"{session}\"]');")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_takes_a_pasted_access_token_and_shows_only_its_sessions() {
    if !webdriver::available() {
        return;
    }
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let agent_a = provider.token("agent-a", "toold.execute").await;
    let agent_b = provider.token("agent-b", "toold.execute").await;
    let theirs = session_of(toold, &agent_b, json!({})).await;
    let browser = Browser::start(screenshot_dir()).await;
    browser.goto(&format!("{}/ui", toold.base)).await;
    browser
        .wait_for(
            "the login form",
            "return !document.getElementById('login').hidden;",
        )
        .await;
    // A token the provider did not sign is refused in the form.
    browser
        .type_into("#login-token", &format!("{agent_a}x"))
        .await;
    browser.click("#login-submit").await;
    browser
        .wait_for(
            "the refusal",
            "return document.getElementById('login-error').textContent.includes('refused');",
        )
        .await;
    browser
        .eval(
            "document.getElementById('login-token').value = '';",
            json!([]),
        )
        .await;
    browser.type_into("#login-token", &agent_a).await;
    browser.click("#login-submit").await;
    browser
        .wait_for(
            "the live badge",
            "return document.getElementById('connection').textContent === 'live';",
        )
        .await;
    let mine = session_of(toold, &agent_a, json!({})).await;
    browser
        .wait_for("the agent's own session", &row_of(&mine))
        .await;
    browser.screenshot("oidc-agent-sessions").await;
    let shown = browser.eval(&row_of(&theirs), json!([])).await;
    assert_eq!(shown, json!(false), "another agent's session showed");
}
