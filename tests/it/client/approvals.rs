//! `toold approvals`: a call waiting on an `ask` rule is listed (across sessions, with no
//! `--session`), and `approvals allow ID` lets it finish (exit 0) while `approvals deny ID`
//! fails it (exit 1). An approval that is not pending is an error naming it.

use std::time::Duration;

use super::harness::{Ran, client, ended, run};
use crate::http::harness::Toold;

const ASK_ECHO: &str = "[permissions]\nask = [\"bash(echo:*)\"]\n";

/// The first row of `toold approvals` (under its header) once there is one (30 s guard).
async fn first_pending(toold: &Toold) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = run(toold, &["approvals"]).await;
        assert_eq!(listed.code, 0, "{listed:?}");
        if let Some(line) = listed.stdout.lines().nth(1) {
            return line.split('\t').map(str::to_owned).collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `echo TEXT` with `toold call`, resolves its approval with `decision`; the call's end.
async fn call_resolved_by(toold: &Toold, text: &str, decision: &str) -> Ran {
    let input = serde_json::json!({"command": format!("echo {text}")}).to_string();
    let call = client(toold, &["call", "bash", &input]).spawn().unwrap();
    let pending = first_pending(toold).await;
    assert_eq!(pending[2], "bash", "{pending:?}");
    assert!(pending[4].contains(&format!("echo {text}")), "{pending:?}");
    let resolved = run(toold, &["approvals", decision, &pending[0]]).await;
    assert_eq!(resolved.code, 0, "{resolved:?}");
    assert!(
        resolved.stderr.contains(&pending[1]),
        "names the session: {resolved:?}"
    );
    ended(call).await
}

#[tokio::test]
async fn approvals_allow_lets_a_waiting_call_finish_and_deny_fails_it() {
    let toold = Toold::start_with_config(ASK_ECHO);

    let allowed = call_resolved_by(&toold, "approved", "allow").await;
    assert_eq!(allowed.code, 0, "{allowed:?}");
    assert_eq!(allowed.stdout, "approved\n");

    let denied = call_resolved_by(&toold, "refused", "deny").await;
    assert_eq!(denied.code, 1, "{denied:?}");
    assert!(denied.stderr.contains("bash failed"), "{denied:?}");

    let listed = run(&toold, &["approvals"]).await;
    assert_eq!(
        (listed.code, listed.stdout.as_str()),
        (0, "ID\tSESSION\tTOOL\tCALL\tINPUT\tREASON\n"),
        "{listed:?}"
    );
    let gone = run(&toold, &["approvals", "allow", "appr_nope"]).await;
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("appr_nope"), "{gone:?}");
}
