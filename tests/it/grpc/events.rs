//! `Subscribe`: live events, resuming after a seq with nothing lost or repeated, and the
//! same filters as SSE.

use serde_json::{Value, json};
use toold::api::grpc::proto;

use crate::grpc::harness::{Client, Toold, call, next};

async fn run_batch(client: &mut Client, session: &str, workspace: &std::path::Path, n: usize) {
    let calls = (0..n)
        .map(|i| {
            call(
                &format!("r{i}"),
                "read_file",
                json!({"file_path": workspace.join("f.txt")}),
            )
        })
        .collect();
    let batch = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: session.into(),
            calls,
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        batch.results.iter().all(|r| !r.is_error),
        "{:?}",
        batch.results
    );
}

/// Events up to and including the `n`th `batch:end`.
async fn until_batch_end(
    stream: &mut tonic::Streaming<proto::Event>,
    n: usize,
) -> Vec<proto::Event> {
    let mut events = Vec::new();
    let mut ends = 0;
    while ends < n {
        let event = next(stream).await.expect("the subscription goes on");
        ends += usize::from(event.r#type == "batch:end");
        events.push(event);
    }
    events
}

fn subscribe(session: &str, after_seq: Option<u64>) -> proto::SubscribeRequest {
    proto::SubscribeRequest {
        session_id: session.into(),
        after_seq,
        ..Default::default()
    }
}

#[tokio::test]
async fn subscribe_resumes_after_a_seq_without_loss_or_duplicates() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    std::fs::write(workspace.join("f.txt"), "x\n").unwrap();
    let mut live = client
        .subscribe(subscribe(&session, None))
        .await
        .unwrap()
        .into_inner();
    run_batch(&mut client, &session, &workspace, 3).await;
    let first = until_batch_end(&mut live, 1).await;
    assert_eq!(first[0].r#type, "batch:start");
    let seqs: Vec<u64> = first.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    for event in &first {
        assert_eq!(event.session_id, session);
        let data: Value = serde_json::from_str(&event.data_json).expect("data_json is JSON");
        assert!(data.is_object(), "{data}");
        humantime::parse_rfc3339(&event.ts).expect("ts is RFC 3339");
    }

    // Resume after the third event: the rest of the first batch from the store, then live.
    let resume_after = first[2].seq;
    let mut resumed = client
        .subscribe(subscribe(&session, Some(resume_after)))
        .await
        .unwrap()
        .into_inner();
    run_batch(&mut client, &session, &workspace, 2).await;
    let second = until_batch_end(&mut live, 1).await;
    let replayed_and_live = until_batch_end(&mut resumed, 2).await;
    let expected: Vec<u64> = first[3..].iter().chain(&second).map(|e| e.seq).collect();
    let got: Vec<u64> = replayed_and_live.iter().map(|e| e.seq).collect();
    assert_eq!(got, expected, "every event after the seq, once, in order");
    assert_eq!(replayed_and_live[..first.len() - 3], first[3..]);

    // after_seq = 0 replays everything kept, from the session's start.
    let mut all = client
        .subscribe(subscribe(&session, Some(0)))
        .await
        .unwrap()
        .into_inner();
    let from_start = until_batch_end(&mut all, 2).await;
    assert_eq!(from_start[0].r#type, "session:start");
    assert_eq!(from_start.last().unwrap().seq, second.last().unwrap().seq);
}

#[tokio::test]
async fn subscribe_filters_by_type_tool_and_session() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let (other, other_workspace) = toold.session(&mut client).await;
    std::fs::write(workspace.join("f.txt"), "x\n").unwrap();
    std::fs::write(other_workspace.join("f.txt"), "x\n").unwrap();
    let mut posts = client
        .subscribe(proto::SubscribeRequest {
            r#type: "tool:post".into(),
            tool: "read_file".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut ends_of_other = client
        .subscribe(proto::SubscribeRequest {
            session_id: other.clone(),
            r#type: "batch:end".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    run_batch(&mut client, &session, &workspace, 2).await;
    run_batch(&mut client, &other, &other_workspace, 1).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = next(&mut posts).await.unwrap();
        assert_eq!(
            (event.r#type.as_str(), event.tool.as_str()),
            ("tool:post", "read_file")
        );
        seen.push(event.session_id);
    }
    assert_eq!(seen, [session.clone(), session, other.clone()]);
    let end = next(&mut ends_of_other).await.unwrap();
    assert_eq!(
        (end.r#type.as_str(), end.session_id.as_str()),
        ("batch:end", other.as_str())
    );
}
