//! `toold call`: exit 0 with the output, 1 when the tool failed (its error printed), 2 for a
//! malformed JSON argument, 3 for a refused token, 4 with nothing listening; an offloaded
//! output printed whole; `--session` runs in a session that stays open; Ctrl-C cancels the
//! call and closes the session the call made. And the listings, `sessions` and `tools`.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::harness::{Ran, client_at, finish, run};
use crate::http::harness::Toold;

fn assert_exit(ran: &Ran, code: i32) {
    assert_eq!(ran.code, code, "{ran:?}");
}

#[tokio::test]
async fn call_exits_0_when_the_call_succeeds_1_when_the_tool_fails_and_2_for_bad_json() {
    let toold = Toold::start();

    let ok = run(&toold, &["call", "bash", r#"{"command":"echo hello"}"#]).await;
    assert_exit(&ok, 0);
    assert_eq!(ok.stdout, "hello\n");
    assert!(ok.stderr.contains("toold: session sess_"), "{ok:?}");

    let failed = run(
        &toold,
        &["call", "bash", r#"{"command":"echo oops; exit 3"}"#],
    )
    .await;
    assert_exit(&failed, 1);
    assert!(
        failed.stdout.contains("oops") && failed.stdout.contains("exit code: 3"),
        "{failed:?}"
    );
    assert!(
        failed.stderr.contains("bash failed (execution)"),
        "{failed:?}"
    );

    let unknown = run(&toold, &["call", "reed_file", r#"{"path":"a"}"#]).await;
    assert_exit(&unknown, 1);
    assert!(
        unknown.stdout.contains(r#"unknown tool "reed_file""#),
        "{unknown:?}"
    );
    assert!(
        unknown.stderr.contains("failed (unknown_tool)"),
        "{unknown:?}"
    );

    let malformed = run(&toold, &["call", "bash", r#"{"command":"#]).await;
    assert_exit(&malformed, 2);
    assert!(malformed.stderr.contains("is not JSON"), "{malformed:?}");
    assert!(malformed.stdout.is_empty(), "{malformed:?}");

    let not_an_object = run(&toold, &["call", "bash", "[1]"]).await;
    assert_exit(&not_an_object, 2);
    assert!(
        not_an_object.stderr.contains("is not a JSON object"),
        "{not_an_object:?}"
    );

    let missing_input = run(&toold, &["call", "bash"]).await;
    assert_exit(&missing_input, 2);

    // The sessions `call` made for itself were closed after their calls.
    let listed = toold.get("/v1/sessions").await;
    let open: Vec<&Value> = listed.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["closed"] != true)
        .collect();
    assert!(open.is_empty(), "{open:?}");
}

#[tokio::test]
async fn call_in_a_given_session_keeps_its_state_and_leaves_it_open() {
    let toold = Toold::start();
    let session = toold.session().await;
    let args = |command: &str| {
        let input = serde_json::json!({"command": command}).to_string();
        vec![
            "call".to_owned(),
            "--session".into(),
            session.clone(),
            "bash".into(),
            input,
        ]
    };
    let mkdir = args("mkdir sub && cd sub");
    let mkdir: Vec<&str> = mkdir.iter().map(String::as_str).collect();
    assert_exit(&run(&toold, &mkdir).await, 0);
    let pwd = args("pwd");
    let pwd: Vec<&str> = pwd.iter().map(String::as_str).collect();
    let ran = run(&toold, &pwd).await;
    assert_exit(&ran, 0);
    assert!(
        ran.stdout.trim_end().ends_with("/sub"),
        "the shell's directory persists: {ran:?}"
    );
    let described = toold.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(described.body["closed"], false, "{}", described.body);

    let unknown = run(&toold, &["call", "--session", "sess_nope", "bash", "{}"]).await;
    assert_exit(&unknown, 1);
    assert!(unknown.stderr.contains("sess_nope"), "{unknown:?}");
}

#[tokio::test]
async fn call_prints_the_whole_of_an_offloaded_output() {
    let toold = Toold::start();
    let ran = run(&toold, &["call", "bash", r#"{"command":"seq 1 400000"}"#]).await;
    assert_exit(&ran, 0);
    let expected: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    // Over 2.6 M characters: three pages of `GET /v1/results/{id}`, nothing lost or repeated.
    assert_eq!(ran.stdout.len(), expected.len());
    assert!(ran.stdout == expected, "the output differs from seq's");
}

#[tokio::test]
async fn call_exits_3_for_a_refused_token() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let toold = Toold::start_with(dir, &["--auth-token", "right-token"]);
    let input = r#"{"command":"echo hi"}"#;
    let wrong = finish(client_at(
        &toold.base,
        Some("wrong-token"),
        &["call", "bash", input],
    ))
    .await;
    assert_exit(&wrong, 3);
    assert!(
        wrong.stderr.contains("refused the token (401)"),
        "{wrong:?}"
    );
    let none = finish(client_at(&toold.base, None, &["call", "bash", input])).await;
    assert_exit(&none, 3);
    let tail = finish(client_at(&toold.base, Some("wrong-token"), &["tail"])).await;
    assert_exit(&tail, 3);
    let right = run(&toold, &["call", "bash", input]).await;
    assert_exit(&right, 0);
    assert_eq!(right.stdout, "hi\n");
}

#[tokio::test]
async fn the_client_exits_4_when_nothing_listens() {
    // A port that was just free: nothing listens on it once the listener is gone.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    for args in [
        &["call", "bash", "{}"][..],
        &["tail"],
        &["sessions"],
        &["approvals"],
    ] {
        let ran = finish(client_at(&url, None, args)).await;
        assert_exit(&ran, 4);
        assert!(
            ran.stderr.contains(&format!("nothing answers at {url}")),
            "{ran:?}"
        );
    }
    let bad_url = finish(client_at("ftp://example", None, &["sessions"])).await;
    assert_exit(&bad_url, 2);
}

#[tokio::test]
async fn sessions_and_tools_list_what_the_daemon_has() {
    let toold = Toold::start();
    let session = toold.session().await;
    let sessions = run(&toold, &["sessions"]).await;
    assert_exit(&sessions, 0);
    let line = sessions.stdout.lines().find(|l| l.starts_with(&session));
    let columns: Vec<&str> = line.expect("the session is listed").split('\t').collect();
    assert_eq!(columns[1], "workspace_write", "{columns:?}");

    let tools = run(&toold, &["tools"]).await;
    assert_exit(&tools, 0);
    assert!(
        tools.stdout.lines().any(|l| l.starts_with("bash\t")),
        "{tools:?}"
    );

    let anthropic = run(
        &toold,
        &["tools", "--format", "anthropic", "--session", &session],
    )
    .await;
    assert_exit(&anthropic, 0);
    let definitions: Value = serde_json::from_str(&anthropic.stdout).unwrap();
    let bash = definitions
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "bash");
    assert!(
        bash.expect("bash is defined")["input_schema"].is_object(),
        "{bash:?}"
    );

    let unknown_format = run(&toold, &["tools", "--format", "klingon"]).await;
    assert_exit(&unknown_format, 2);
    assert!(
        unknown_format.stderr.contains("klingon"),
        "{unknown_format:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_call_and_closes_the_session_the_call_made() {
    let toold = Toold::start();
    let mut call = super::harness::client(&toold, &["call", "bash", r#"{"command":"sleep 60"}"#])
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(call.stderr.take().unwrap()).lines();
    let first = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the session line",
        stderr.next_line(),
    )
    .await
    .unwrap()
    .expect("the session line");
    let session = first
        .strip_prefix("toold: session ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    // The shell is running once bash reports its pid.
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    while events.next().await.expect("the stream goes on").event != "tool:progress" {}
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(call.id().unwrap() as i32, libc::SIGINT) };
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), call.wait())
        .await
        .expect("the call ends well before the sleep would")
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let mut rest = String::new();
    while let Some(line) = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the client's stderr",
        stderr.next_line(),
    )
    .await
    .unwrap()
    {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert!(rest.contains("interrupting the call"), "{rest}");
    assert!(rest.contains("bash failed (cancelled)"), "{rest}");
    // Closed: the daemon no longer knows it.
    let described = toold.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(
        described.status,
        reqwest::StatusCode::NOT_FOUND,
        "{}",
        described.body
    );
}
