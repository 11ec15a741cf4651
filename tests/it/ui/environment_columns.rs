//! The dashboard's sessions table (DESIGN §12) in a real browser: an environment session's
//! row shows its image, tier and limits; a plain session's row leaves those cells empty.

use serde_json::json;

use super::browser::screenshot_dir;
use super::webdriver::{self, Browser};
use crate::environment::fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_table_shows_an_environments_image_tier_and_limits() {
    if !webdriver::available() {
        return;
    }
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let environment = toold
        .session_with(&json!({"environment": {"image": image, "limits": {"memory_mb": 256}}}))
        .await;
    let plain = toold.session().await;
    let browser = Browser::start(screenshot_dir()).await;
    browser.goto(&format!("{}/ui", toold.base)).await;
    let cells = |session: &str| {
        format!(
            "const row = document.querySelector('#sessions tr[data-session=\"{session}\"]'); \
             return row ? [...row.cells].map((cell) => cell.textContent) : null;"
        )
    };
    let shown = browser
        .wait_for("the environment session's row", &cells(&environment))
        .await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    assert_eq!(shown.len(), 8, "{shown:?}");
    assert_eq!(
        (shown[5].as_str(), shown[6].as_str()),
        (image.as_str(), "bwrap")
    );
    assert!(shown[7].contains("memory_mb=256"), "{shown:?}");
    let headings = browser
        .eval(
            "return [...document.querySelectorAll('#sessions thead th')].map((th) => th.textContent);",
            json!([]),
        )
        .await;
    let headings: Vec<String> = serde_json::from_value(headings).unwrap();
    assert_eq!(&headings[5..], ["image", "tier", "limits"], "{headings:?}");
    let shown = browser
        .wait_for("the plain session's row", &cells(&plain))
        .await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    assert_eq!(&shown[5..], ["", "", ""], "{shown:?}");
}
