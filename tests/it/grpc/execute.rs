//! `Execute`: calls streamed in one at a time while earlier ones run, events at once,
//! results in request order, then `done`; and `Interrupt` on a call in such a stream.

use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use toold::api::grpc::proto::{
    self, ExecuteEnd, ExecuteRequest, ExecuteStart, execute_request, execute_response,
};

use crate::grpc::harness::{Toold, call, next};

fn start(session_id: &str) -> ExecuteRequest {
    ExecuteRequest {
        kind: Some(execute_request::Kind::Start(ExecuteStart {
            session_id: session_id.into(),
        })),
    }
}

fn send_call(call: proto::ToolCall) -> ExecuteRequest {
    ExecuteRequest {
        kind: Some(execute_request::Kind::Call(call)),
    }
}

fn end() -> ExecuteRequest {
    ExecuteRequest {
        kind: Some(execute_request::Kind::End(ExecuteEnd {})),
    }
}

/// What the client saw, in order: a marker when it sent each call, and what it received.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Sent(String),
    Event {
        kind: String,
        call_id: String,
        batch_id: String,
    },
    Result {
        id: String,
        output: String,
        error_kind: String,
    },
    Done(String),
}

fn seen(response: proto::ExecuteResponse) -> Seen {
    match response.kind.expect("a response kind") {
        execute_response::Kind::Event(e) => Seen::Event {
            kind: e.r#type,
            call_id: e.call_id,
            batch_id: e.batch_id,
        },
        execute_response::Kind::Result(r) => Seen::Result {
            id: r.id,
            output: r.output,
            error_kind: r.error_kind,
        },
        execute_response::Kind::Done(d) => Seen::Done(d.batch_id),
    }
}

#[tokio::test]
async fn calls_start_as_they_arrive_and_results_come_back_in_order() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let file = workspace.join("a.txt");
    let (requests, outgoing) = mpsc::channel(8);
    requests.send(start(&session)).await.unwrap();
    let mut responses = client
        .execute(ReceiverStream::new(outgoing))
        .await
        .expect("the stream opens")
        .into_inner();
    let mut log = Vec::new();
    // Waits, logging everything received, until `until` holds for an item.
    async fn wait_for(
        responses: &mut tonic::Streaming<proto::ExecuteResponse>,
        log: &mut Vec<Seen>,
        until: impl Fn(&Seen) -> bool,
    ) {
        loop {
            let item = seen(next(responses).await.expect("the stream goes on"));
            let found = until(&item);
            log.push(item);
            if found {
                return;
            }
        }
    }
    let is_event = |kind: &'static str, id: &'static str| move |item: &Seen| matches!(item, Seen::Event { kind: k, call_id, .. } if k == kind && call_id == id);

    // Call 1 alone: it runs (and completes) while the client has not sent anything else.
    let write = json!({"file_path": file, "content": "streamed\n"});
    log.push(Seen::Sent("c1".into()));
    requests
        .send(send_call(call("c1", "write_file", write)))
        .await
        .unwrap();
    wait_for(&mut responses, &mut log, is_event("tool:post", "c1")).await;

    // Call 2 reads what call 1 wrote.
    log.push(Seen::Sent("c2".into()));
    let read = json!({"file_path": file});
    requests
        .send(send_call(call("c2", "read_file", read)))
        .await
        .unwrap();
    wait_for(&mut responses, &mut log, is_event("tool:pre", "c2")).await;

    log.push(Seen::Sent("c3".into()));
    let cat = json!({"command": "cat a.txt"});
    requests
        .send(send_call(call("c3", "bash", cat)))
        .await
        .unwrap();
    requests.send(end()).await.unwrap();
    while let Some(response) =
        tokio::time::timeout(crate::grpc::harness::GUARD, responses.message())
            .await
            .expect("the stream ends within the guard time")
            .expect("the stream does not fail")
    {
        log.push(seen(response));
    }

    let position = |wanted: &Seen| log.iter().position(|item| item == wanted);
    let sent_c3 = position(&Seen::Sent("c3".into())).unwrap();
    let c1_executing = log
        .iter()
        .position(|item| is_event("tool:pre", "c1")(item))
        .expect("call 1's tool:pre event");
    assert!(
        c1_executing < sent_c3,
        "call 1 ran before call 3 was sent: {log:#?}"
    );
    let results: Vec<&Seen> = log
        .iter()
        .filter(|item| matches!(item, Seen::Result { .. }))
        .collect();
    let ids: Vec<&str> = results
        .iter()
        .map(|item| match item {
            Seen::Result { id, .. } => id.as_str(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ids, ["c1", "c2", "c3"], "{log:#?}");
    for result in &results {
        let Seen::Result {
            error_kind, output, ..
        } = result
        else {
            unreachable!()
        };
        assert_eq!(error_kind, "", "{output}");
    }
    let Seen::Result { output, .. } = results[1] else {
        unreachable!()
    };
    assert!(
        output.contains("streamed"),
        "call 2 read call 1's write: {output}"
    );
    let Seen::Result { output, .. } = results[2] else {
        unreachable!()
    };
    assert!(output.contains("streamed"), "{output}");

    // The stream ends with `done` naming the batch its events belong to.
    let Some(Seen::Done(batch_id)) = log.last() else {
        panic!("the last message is done: {log:#?}");
    };
    assert!(log.iter().any(|item| matches!(item, Seen::Event { kind, batch_id: b, .. } if kind == "batch:end" && b == batch_id)));
    for item in &log {
        if let Seen::Event { batch_id: b, .. } = item {
            assert_eq!(b, batch_id);
        }
    }
    // Each result follows its call's completion event.
    for id in ["c1", "c2", "c3"] {
        let post = log
            .iter()
            .position(|i| is_event("tool:post", id)(i))
            .unwrap();
        let result = log
            .iter()
            .position(|i| matches!(i, Seen::Result { id: r, .. } if r == id))
            .unwrap();
        assert!(post < result, "{id}: {log:#?}");
    }
}

#[tokio::test]
async fn interrupt_cancels_a_running_call_of_a_stream() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let (requests, outgoing) = mpsc::channel(8);
    requests.send(start(&session)).await.unwrap();
    let slow = json!({"command": "sleep 60"});
    requests
        .send(send_call(call("slow", "bash", slow)))
        .await
        .unwrap();
    requests.send(end()).await.unwrap();
    let mut responses = client
        .execute(ReceiverStream::new(outgoing))
        .await
        .unwrap()
        .into_inner();
    loop {
        if let Seen::Event { kind, .. } = seen(next(&mut responses).await.unwrap())
            && kind == "tool:pre"
        {
            break;
        }
    }
    client
        .interrupt(proto::InterruptRequest {
            session_id: session.clone(),
        })
        .await
        .expect("interrupt accepted");
    loop {
        if let Seen::Result { id, error_kind, .. } = seen(next(&mut responses).await.unwrap()) {
            assert_eq!(id, "slow");
            assert_eq!(error_kind, "cancelled");
            break;
        }
    }
}
