//! `PullImage` over gRPC (DESIGN §12) with the generated tonic client against the registry
//! fixture: the image info HTTP's `POST /v1/images/pull` answers, NOT_FOUND for an image the
//! registry lacks, INVALID_ARGUMENT for a malformed reference, and the roles HTTP applies
//! (an agent pulls, an observer is refused on both doors).

use reqwest::StatusCode;
use serde_json::json;
use tonic::Code;
use toold::api::grpc::proto;

use crate::auth::{AGENT_A, OBSERVER, daemon_configured, grpc_client, post, with};
use crate::support::registry::{self, Registry};

fn pull(image: &str) -> proto::PullImageRequest {
    proto::PullImageRequest {
        image: image.to_owned(),
    }
}

#[tokio::test]
async fn pull_image_answers_what_http_does_and_refuses_what_http_refuses() {
    if let Err(why) = registry::available() {
        crate::support::skip_unless_ci(&why);
        return;
    }
    let registry = Registry::start();
    let toold = daemon_configured(&registry.settings(), &[]);
    let mut client = grpc_client(&toold).await;
    let image = registry.image("test/busybox:1");

    let pulled = client
        .pull_image(with(AGENT_A, pull(&image)))
        .await
        .expect("an agent pulls")
        .into_inner();
    assert!(pulled.digest.starts_with("sha256:"), "{pulled:?}");
    assert!(pulled.references.contains(&image), "{pulled:?}");
    assert!(pulled.size_bytes > 500_000, "{pulled:?}");
    assert!(pulled.layers >= 1, "{pulled:?}");
    assert!(!pulled.pulled_at.is_empty(), "{pulled:?}");
    // The same image as HTTP's answer (and its listing) has it.
    let http = post(&toold, AGENT_A, "/v1/images/pull", json!({"image": image})).await;
    assert_eq!(http.status, StatusCode::OK, "{}", http.body);
    assert_eq!(http.body["digest"], pulled.digest.as_str());
    assert_eq!(http.body["env"], json!(pulled.env));
    assert_eq!(http.body["size_bytes"], pulled.size_bytes);
    assert_eq!(http.body["layers"], pulled.layers);
    assert_eq!(
        http.body["working_dir"].as_str().unwrap_or_default(),
        pulled.working_dir
    );

    let missing = registry.image("test/nothing:1");
    let refused = client
        .pull_image(with(AGENT_A, pull(&missing)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    assert!(refused.message().contains(&missing), "{refused:?}");

    for malformed in ["", "UPPER/Case:1", "host:5000/a b:1", "a@sha256:zz"] {
        let refused = client
            .pull_image(with(AGENT_A, pull(malformed)))
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::InvalidArgument,
            "{malformed:?}: {refused:?}"
        );
    }

    // An observer reads the cache but pulls nothing, on either door.
    let http = post(&toold, OBSERVER, "/v1/images/pull", json!({"image": image})).await;
    assert_eq!(http.status, StatusCode::FORBIDDEN, "{}", http.body);
    let refused = client
        .pull_image(with(OBSERVER, pull(&image)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    // And no token at all is no caller.
    let refused = client
        .pull_image(tonic::Request::new(pull(&image)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
}
