//! Forwarding between two real daemons with a fleet secret on one Postgres schema: what B is
//! sent for A's session (batches plain, streamed and keyed, tools, interrupt; gRPC
//! `ExecuteBatch`, `Execute`, `ListTools`, `PutFile`, `GetFile`, `Snapshot`, `Fork`) runs on A
//! and comes back unchanged; a hop without
//! the right secret is refused by A and nothing runs; a hop for a session its receiver does
//! not run is 503 with `Retry-After`, never forwarded again; past `max_sessions` a new session
//! is created on the daemon with fewer.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tonic::transport::Channel;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{self, execute_request, execute_response};

use super::{FLEET_CONFIG, daemon_with, echo_batch};
use crate::http::harness::{Reply, Toold};
use crate::support::postgres::{TestSchema, postgres_url};

pub(super) const SECRET: &str = "a-fleet-secret-for-tests";

/// The fleet's settings with its secret and `extra` lines of `[server]`.
pub(super) fn with_secret(extra: &str) -> String {
    format!("{FLEET_CONFIG}fleet_secret = \"{SECRET}\"\n{extra}")
}

struct Pair {
    a: Toold,
    b: Toold,
    _schema: TestSchema,
}

async fn pair(extra: &str) -> Option<Pair> {
    let schema = TestSchema::create(&postgres_url("fleet forwarding tests")?).await;
    let url = schema.url();
    Some(Pair {
        a: daemon_with(&url, &with_secret(extra)),
        b: daemon_with(&url, &with_secret(extra)),
        _schema: schema,
    })
}

async fn owner(toold: &Toold, session: &str) -> String {
    let described = toold.get(&format!("/v1/sessions/{session}")).await;
    described.body["owner"].as_str().unwrap().to_owned()
}

async fn audit_rows(toold: &Toold, session: &str) -> Vec<Value> {
    let calls = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    calls.body["calls"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_b_is_sent_for_as_session_runs_on_a_and_comes_back_unchanged() {
    let Some(pair) = pair("").await else {
        return;
    };
    // Fields drop in order: both daemons, then the schema.
    let Pair { a, b, .. } = &pair;
    let session = a.session().await;
    let a_node = owner(a, &session).await;
    let batches = format!("/v1/sessions/{session}/batches");
    let plain = b.post(&batches, &echo_batch(2)).await;
    assert_eq!(plain.status, StatusCode::OK, "{}", plain.body);
    assert_eq!(plain.body["results"][1]["output"], "1\n");
    assert!(plain.headers.contains_key("x-toold-batch-id"));
    // Streamed over SSE through B: each result, then done, as A sends them.
    let mut stream = b.sse(&batches, Some(&echo_batch(3)), None).await;
    let mut events = Vec::new();
    while let Some(frame) = stream.next().await {
        if frame.event == "result" {
            let n = events.iter().filter(|e| *e == "result").count();
            assert_eq!(frame.data["output"], format!("{n}\n"));
        }
        if frame.event != "tool:progress" {
            events.push(frame.event);
        }
    }
    assert_eq!(events, ["result", "result", "result", "done"]);
    // Keyed: the retry through B replays A's stored answer.
    let keyed = json!({"calls": echo_batch(1)["calls"], "idempotency_key": "k1"});
    let first = b.post(&batches, &keyed).await;
    let again = b.post(&batches, &keyed).await;
    assert_eq!(first.body, again.body);
    assert_eq!(again.headers["x-toold-replayed"], "true");
    // The pool and an interrupt need the live session too.
    let tools = b.get(&format!("/v1/sessions/{session}/tools")).await;
    assert_eq!(tools.status, StatusCode::OK, "{}", tools.body);
    assert!(!tools.body["tools"].as_array().unwrap().is_empty());
    let interrupted = b
        .post(&format!("/v1/sessions/{session}/interrupt"), &json!({}))
        .await;
    assert_eq!(interrupted.status, StatusCode::OK, "{}", interrupted.body);
    // Every call ran on A.
    let rows = audit_rows(a, &session).await;
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(
        rows.iter().all(|row| row["node"] == a_node.as_str()),
        "{rows:?}"
    );
    // An unknown session is still unknown, through either.
    let unknown = b
        .post("/v1/sessions/sess_nope/batches", &echo_batch(1))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

/// POSTs `body` to `path` on `toold` with the hop headers `hop`.
async fn post_hop(toold: &Toold, path: &str, body: &Value, hop: &[(&str, &str)]) -> Reply {
    let mut builder = toold
        .client
        .post(format!("{}{path}", toold.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap());
    for (name, value) in hop {
        builder = builder.header(*name, *value);
    }
    toold.send(builder).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hop_without_the_right_secret_is_refused_and_a_hop_is_never_forwarded_again() {
    let Some(pair) = pair("").await else {
        return;
    };
    // Fields drop in order: both daemons, then the schema.
    let Pair { a, b, .. } = &pair;
    let session = a.session().await;
    let batches = format!("/v1/sessions/{session}/batches");
    let by = ("x-toold-forwarded-by", "node_b");
    for hop in [
        vec![by],
        vec![by, ("x-toold-fleet-secret", "not-the-secret")],
        vec![("x-toold-fleet-secret", "")],
    ] {
        let refused = post_hop(a, &batches, &echo_batch(1), &hop).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{hop:?}");
        assert_eq!(refused.body["error"]["code"], "unauthenticated");
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("x-toold-fleet-secret"), "{message}");
    }
    assert_eq!(
        audit_rows(a, &session).await,
        Vec::<Value>::new(),
        "nothing ran"
    );
    // With the secret A runs it; B, which does not run the session, answers 503 itself.
    let secret = ("x-toold-fleet-secret", SECRET);
    let accepted = post_hop(a, &batches, &echo_batch(1), &[by, secret]).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.body);
    let not_here = post_hop(b, &batches, &echo_batch(1), &[by, secret]).await;
    assert_eq!(
        not_here.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        not_here.body
    );
    assert_eq!(not_here.body["error"]["code"], "unavailable");
    assert_eq!(not_here.headers["retry-after"], "1");
    assert_eq!(
        audit_rows(a, &session).await.len(),
        1,
        "only the accepted hop ran"
    );
    // gRPC: the same refusal, as UNAUTHENTICATED.
    let mut client = grpc(a).await;
    let mut request = tonic::Request::new(batch_message(&session, "g1"));
    request
        .metadata_mut()
        .insert("x-toold-fleet-secret", "wrong".parse().unwrap());
    let refused = client.execute_batch(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
}

async fn grpc(toold: &Toold) -> ToolServiceClient<Channel> {
    let channel = Channel::from_shared(toold.base.clone())
        .unwrap()
        .connect()
        .await
        .expect("gRPC connects");
    ToolServiceClient::new(channel)
}

fn batch_message(session: &str, call: &str) -> proto::ExecuteBatchRequest {
    proto::ExecuteBatchRequest {
        session_id: session.to_owned(),
        calls: vec![proto::ToolCall {
            id: call.to_owned(),
            name: "bash".into(),
            input_json: json!({"command": format!("echo {call}")}).to_string(),
        }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_rpcs_sent_to_b_for_as_session_are_relayed_to_a() {
    let Some(pair) = pair("").await else {
        return;
    };
    // Fields drop in order: both daemons, then the schema.
    let Pair { a, b, .. } = &pair;
    let session = a.session().await;
    let a_node = owner(a, &session).await;
    let mut on_b = grpc(b).await;
    let whole = on_b
        .execute_batch(batch_message(&session, "g1"))
        .await
        .expect("relayed to A")
        .into_inner();
    assert_eq!(whole.results[0].output, "g1\n");
    let tools = on_b
        .list_tools(proto::ListToolsRequest {
            session_id: session.clone(),
            format: "toold".into(),
        })
        .await
        .expect("relayed to A")
        .into_inner();
    assert!(tools.tools_json.contains("\"bash\""));
    // The bidirectional stream: start, two calls, end; events, results in order, done.
    let start = execute_request::Kind::Start(proto::ExecuteStart {
        session_id: session.clone(),
    });
    let mut messages = vec![start];
    for call in ["s1", "s2"] {
        messages.push(execute_request::Kind::Call(
            batch_message(&session, call).calls.remove(0),
        ));
    }
    messages.push(execute_request::Kind::End(proto::ExecuteEnd {}));
    let outbound = futures::stream::iter(
        messages
            .into_iter()
            .map(|kind| proto::ExecuteRequest { kind: Some(kind) }),
    );
    let mut responses = on_b.execute(outbound).await.expect("relayed").into_inner();
    let (mut results, mut done) = (Vec::new(), None);
    while let Some(response) = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the relay's next message",
        responses.message(),
    )
    .await
    .expect("the relay does not fail")
    {
        match response.kind {
            Some(execute_response::Kind::Result(result)) => results.push(result.output),
            // Events are the stream's own business, checked in tests/it/grpc/execute.rs.
            Some(execute_response::Kind::Event(_)) | None => {}
            Some(execute_response::Kind::Done(batch)) => done = Some(batch.batch_id),
        }
    }
    assert_eq!(results, ["s1\n", "s2\n"]);
    assert!(done.is_some(), "the stream ends with done");
    let rows = audit_rows(a, &session).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|row| row["node"] == a_node.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_transfers_sent_to_b_for_as_session_are_relayed_to_a() {
    use crate::grpc::files::{file, get, put, target};
    let Some(pair) = pair("").await else {
        return;
    };
    let Pair { a, b, .. } = &pair;
    let session = a.session().await;
    let a_node = owner(a, &session).await;
    let mut on_b = grpc(b).await;
    // Several chunks, so the relay carries a stream and not only its first message.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let put_answer = put(
        &mut on_b,
        tonic::Request::new(target(&session, "blob.bin")),
        &data,
    )
    .await
    .expect("relayed to A");
    assert_eq!(put_answer.bytes, data.len() as u64);
    let (_, on_a, body) =
        crate::workspace::get_bytes(a, &format!("/v1/sessions/{session}/files/blob.bin"), &[])
            .await;
    assert!(on_a.contains_key("etag"));
    assert!(body == data, "A holds what B was sent");
    let range = proto::GetFileRequest {
        offset: 10,
        length: 100,
        ..file(&session, "blob.bin")
    };
    let (head, part) = get(&mut on_b, tonic::Request::new(range))
        .await
        .expect("relayed to A");
    assert_eq!(part, data[10..110]);
    assert_eq!(head.etag, on_a["etag"].to_str().unwrap());
    let snapshot = on_b
        .snapshot(proto::SnapshotRequest {
            session_id: session.clone(),
            name: "via b".into(),
        })
        .await
        .expect("relayed to A")
        .into_inner();
    assert_eq!(snapshot.session_id, session);
    let forked = on_b
        .fork(proto::ForkRequest {
            session_id: session.clone(),
            count: 1,
            name: String::new(),
        })
        .await
        .expect("relayed to A")
        .into_inner();
    let fork = &forked.sessions[0];
    assert_eq!(fork.owner, a_node, "the fork runs where its parent does");
    let (_, bytes) = get(&mut on_b, tonic::Request::new(file(&fork.id, "blob.bin")))
        .await
        .expect("relayed to A");
    assert!(bytes == data, "the fork sees its parent's file");
    let rows = audit_rows(a, &session).await;
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|row| row["node"] == a_node.as_str()),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_sessions_a_new_session_is_created_on_the_daemon_with_fewer() {
    let Some(pair) = pair("max_sessions = 1\n").await else {
        return;
    };
    // Fields drop in order: both daemons, then the schema.
    let Pair { a, b, .. } = &pair;
    let first = a.session().await;
    let second = a.session().await;
    let (a_node, b_node) = (owner(a, &first).await, owner(a, &second).await);
    assert_ne!(a_node, b_node, "the second session went to B");
    let on_b = b.get(&format!("/v1/sessions/{second}")).await;
    assert_eq!(on_b.body["owner_address"], b.base.as_str());
    // It runs on B, asked through A.
    let reply = a
        .post(&format!("/v1/sessions/{second}/batches"), &echo_batch(1))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // Both hold one: the next one stays where it was asked.
    let third = b.session().await;
    assert_eq!(owner(b, &third).await, b_node);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_forwarded_through_b_ends_with_an_error_when_a_dies_mid_stream() {
    let Some(mut pair) = pair("").await else {
        return;
    };
    let created = pair
        .a
        .post(
            "/v1/sessions",
            &json!({"permission_mode": "danger_full_access"}),
        )
        .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let body = json!({"calls": [
        {"id": "first", "name": "bash", "input": {"command": "echo first"}},
        {"id": "long", "name": "bash", "input": {"command": "sleep 60"}},
    ]});
    let batches = format!("/v1/sessions/{session}/batches");
    let mut stream = pair.b.sse(&batches, Some(&body), None).await;
    // The first result comes through while the second call runs: nothing waits for the end.
    loop {
        let frame = stream.next().await.expect("frames until the first result");
        if frame.event == "result" {
            assert_eq!(frame.data["output"], "first\n");
            break;
        }
    }
    pair.a.kill();
    let ended = loop {
        match stream.try_next().await {
            Ok(Some(frame)) if frame.event == "tool:progress" => continue,
            other => break other,
        }
    };
    assert!(
        ended.is_err(),
        "the stream ends with an error, not {ended:?}"
    );
}

/// Two agents' tokens, on both daemons.
const AGENTS: &str = "\n[[auth.tokens]]\nname = \"agent-a\"\ntoken = \"token-agent-a\"\n\
     role = \"agent\"\n\n[[auth.tokens]]\nname = \"agent-b\"\ntoken = \"token-agent-b\"\n\
     role = \"agent\"\n";

/// An agent asking B about another principal's session, which A runs, meets it exactly as a
/// missing id (B answers from the shared store before any hop); its owner reaches it through
/// B as through A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_meets_another_principals_session_on_another_daemon_as_a_missing_id() {
    use crate::auth::{AGENT_A, AGENT_B, MISSING, get, session_of};
    let Some(pair) = pair(AGENTS).await else {
        return;
    };
    let Pair { a, b, .. } = &pair;
    let session = session_of(a, AGENT_A, json!({})).await;
    let own = get(b, AGENT_A, &format!("/v1/sessions/{session}/tools")).await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    for path in [
        format!("/v1/sessions/{session}"),
        format!("/v1/sessions/{session}/tools"),
        format!("/v1/sessions/{session}/calls"),
    ] {
        let theirs = get(b, AGENT_B, &path).await;
        let missing = get(b, AGENT_B, &path.replace(&session, MISSING)).await;
        assert_eq!(
            theirs.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            theirs.body
        );
        assert_eq!(theirs.status, missing.status, "{path}");
        assert_eq!(
            theirs.body.to_string().replace(&session, MISSING),
            missing.body.to_string(),
            "{path}"
        );
    }
}
