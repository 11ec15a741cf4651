//! `requests_per_second_per_principal`: a burst over the rate is refused over HTTP and gRPC;
//! another principal and the probes are not.

use reqwest::StatusCode;
use toold::api::grpc::proto::ListToolsRequest;

use super::{assert_limited, limited};
use crate::auth::{AGENT_A, AGENT_B, MISSING, get, grpc_client, with};

const KEY: &str = "requests_per_second_per_principal";

/// Requests at once: with a rate of 1 a second, all but one are refused unless they are spread
/// over 19 seconds.
const BURST: usize = 20;

#[tokio::test]
async fn a_burst_over_the_rate_is_refused_and_another_principal_is_not() {
    let toold = limited("requests_per_second_per_principal = 1");
    let replies =
        futures::future::join_all((0..BURST).map(|_| get(&toold, AGENT_A, "/v1/sessions"))).await;
    let refused: Vec<_> = replies
        .iter()
        .filter(|reply| reply.status != StatusCode::OK)
        .collect();
    assert!(!refused.is_empty() && refused.len() < BURST);
    for reply in refused {
        assert_limited(reply, KEY);
    }
    // B's bucket is its own: its first request passes whatever A did.
    let reply = get(&toold, AGENT_B, "/v1/sessions").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // Probes pass the gate without a principal: never limited.
    for _ in 0..BURST {
        let reply = toold.get("/healthz").await;
        assert_eq!(reply.status, StatusCode::OK);
    }

    let client = grpc_client(&toold).await;
    let statuses = futures::future::join_all((0..BURST).map(|_| {
        let mut client = client.clone();
        async move {
            let request = ListToolsRequest {
                session_id: MISSING.to_owned(),
                format: "toold".to_owned(),
            };
            client.list_tools(with(AGENT_A, request)).await.unwrap_err()
        }
    }))
    .await;
    let limited: Vec<_> = statuses
        .iter()
        .filter(|status| status.code() == tonic::Code::ResourceExhausted)
        .collect();
    assert!(!limited.is_empty(), "{statuses:?}");
    assert!(
        limited.iter().all(|status| status.message().contains(KEY)
            && status.metadata().get("retry-after").is_some())
    );
    // The rest were admitted, and found no such session.
    assert!(statuses.iter().all(|s| matches!(
        s.code(),
        tonic::Code::ResourceExhausted | tonic::Code::NotFound
    )));
}
