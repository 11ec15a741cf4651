//! `toold sessions` on a daemon with an environment session (DESIGN §12): the session's line
//! names its image, its isolation tier and its limits, beside a plain session's `-`s.

use serde_json::json;

use super::harness::run;
use crate::environment::fixture;

#[tokio::test]
async fn an_environment_session_is_listed_with_its_image_tier_and_limits() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let environment = toold
        .session_with(&json!({"environment": {
            "image": image,
            "limits": {"memory_mb": 256, "pids": 64},
        }}))
        .await;
    let plain = toold.session().await;
    let shown = toold.get(&format!("/v1/sessions/{environment}")).await;
    let limits = &shown.body["environment"]["limits"];

    let listed = run(&toold, &["sessions"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let line = |id: &str| -> Vec<String> {
        listed
            .stdout
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("no line for {id}: {listed:?}"))
            .split('\t')
            .map(str::to_owned)
            .collect()
    };
    let columns = line(&environment);
    assert_eq!(columns.len(), 9, "{columns:?}");
    assert_eq!(
        (columns[6].as_str(), columns[7].as_str()),
        (image.as_str(), "bwrap")
    );
    // The limits asked for, and the defaults for the rest, as the session's JSON has them.
    let expected: Vec<String> = ["memory_mb", "cpus", "pids", "disk_mb"]
        .iter()
        .filter(|name| !limits[**name].is_null())
        .map(|name| format!("{name}={}", limits[*name]))
        .collect();
    assert_eq!(columns[8], expected.join(","), "{}", shown.body);
    assert!(columns[8].contains("memory_mb=256"), "{columns:?}");
    assert!(columns[8].contains("pids=64"), "{columns:?}");
    assert_eq!(&line(&plain)[6..], ["-", "-", "-"]);
}
