//! Registering providers: the Python provider accepted and listed (to whom), sessions that see
//! its tools (and those that do not), the tools leaving with it; every refusal, with its gRPC
//! status and message, through the Python provider and the generated client.

use reqwest::StatusCode;
use serde_json::json;
use tonic::Code;
use tonic::metadata::MetadataValue;
use toold::api::grpc::proto::{
    self, ProvideToolsRequest, ProvidedToolSpec, ProviderRegistration,
    tool_service_client::ToolServiceClient,
};

use super::{Provider, daemon, session, tool_names};
use crate::auth::{ADMIN, AGENT_A, AGENT_B, OBSERVER, get};

#[tokio::test]
async fn a_provider_is_listed_to_whom_it_may_be_and_its_tools_join_the_sessions_naming_it() {
    let toold = daemon("");
    let Some(mut provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await
    else {
        return;
    };
    let mine = get(&toold, AGENT_A, "/v1/providers").await;
    assert_eq!(mine.status, StatusCode::OK);
    let listed = &mine.body["providers"][0];
    assert_eq!(listed["name"], "demo", "{}", mine.body);
    assert_eq!(listed["principal"], "agent-a");
    assert_eq!(listed["tools"], json!(["demo__echo", "demo__slow"]));
    assert_eq!(
        listed["connections"][0]["connection_id"],
        provider.connection_id.as_str()
    );
    assert_eq!(listed["connections"][0]["transport"], "grpc");
    assert_eq!(
        get(&toold, AGENT_B, "/v1/providers").await.body["providers"],
        json!([])
    );
    assert_eq!(
        get(&toold, OBSERVER, "/v1/providers").await.body["providers"][0]["name"],
        "demo"
    );

    let named = session(&toold, &["demo", "not-yet-connected"]).await;
    let names = tool_names(&toold, &named).await;
    assert!(
        names.contains(&"demo__echo".to_owned()) && names.contains(&"demo__slow".to_owned()),
        "{names:?}"
    );
    let shown = toold.get(&format!("/v1/sessions/{named}")).await;
    assert_eq!(
        shown.body["providers"],
        json!(["demo", "not-yet-connected"])
    );
    let unnamed = session(&toold, &[]).await;
    assert!(
        !tool_names(&toold, &unnamed)
            .await
            .iter()
            .any(|n| n.starts_with("demo__"))
    );
    // B names A's provider: its calls would carry B's inputs to A's program.
    let mut as_b = toold.request_as(Some(AGENT_B), reqwest::Method::POST, "/v1/sessions");
    as_b = as_b
        .header("content-type", "application/json")
        .body(json!({"providers": ["demo"]}).to_string());
    let of_b = toold.send(as_b).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tools_b = toold
        .send(toold.request_as(
            Some(AGENT_B),
            reqwest::Method::GET,
            &format!("/v1/sessions/{of_b}/tools"),
        ))
        .await;
    assert!(
        !tools_b.body.to_string().contains("demo__"),
        "{}",
        tools_b.body
    );
    let bad = toold
        .post("/v1/sessions", &json!({"providers": ["bad name"]}))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(bad.body.to_string().contains("bad name"), "{}", bad.body);

    provider.kill();
    let mut gone = false;
    for _ in 0..100 {
        if get(&toold, AGENT_A, "/v1/providers").await.body["providers"] == json!([]) {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(gone, "the provider left when its process died");
    assert!(
        !tool_names(&toold, &named)
            .await
            .iter()
            .any(|n| n.starts_with("demo__"))
    );
}

#[tokio::test]
async fn refused_registrations_say_why() {
    let toold = daemon("");
    let Some(_held) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await else {
        return;
    };
    let cases: &[(&str, &[&str], &str, &str)] = &[
        (
            AGENT_B,
            &["--provider", "demo"],
            "ALREADY_EXISTS",
            "held by another principal",
        ),
        (
            OBSERVER,
            &["--provider", "mine"],
            "PERMISSION_DENIED",
            "observers",
        ),
        (
            AGENT_A,
            &["--provider", "everyone", "--global"],
            "PERMISSION_DENIED",
            "global",
        ),
        (
            AGENT_A,
            &["--provider", "bad.name"],
            "INVALID_ARGUMENT",
            "does not match",
        ),
        (
            AGENT_A,
            &["--provider", "demo", "--tools", "echo"],
            "ALREADY_EXISTS",
            "same",
        ),
    ];
    for (token, args, code, says) in cases {
        let refused = Provider::start(&toold, token, args)
            .await
            .unwrap()
            .err()
            .unwrap_or_else(|| panic!("{args:?} registered"));
        assert!(
            refused.starts_with(&format!("refused {code}")),
            "{args:?}: {refused}"
        );
        assert!(refused.contains(says), "{args:?}: {refused}");
    }
    // An admin may register a global provider; a second connection of A's shares "demo".
    let global = Provider::start(&toold, ADMIN, &["--provider", "everyone", "--global"])
        .await
        .unwrap();
    assert!(global.is_ok());
    let second = Provider::start(&toold, AGENT_A, &["--provider", "demo"])
        .await
        .unwrap();
    assert!(second.is_ok());
    let unnamed = session(&toold, &[]).await;
    assert!(
        tool_names(&toold, &unnamed)
            .await
            .contains(&"everyone__echo".to_owned())
    );
    let listed = client(&toold)
        .await
        .list_providers(authorized(proto::ListProvidersRequest {}, ADMIN))
        .await
        .unwrap()
        .into_inner();
    let shape: Vec<(String, String, bool, usize)> = listed
        .providers
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.principal.clone(),
                p.global,
                p.connections.len(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("demo".to_owned(), "agent-a".to_owned(), false, 2),
            ("everyone".to_owned(), "token-1".to_owned(), true, 1),
        ]
    );
    assert_eq!(listed.providers[0].tools, ["demo__echo", "demo__slow"]);
    assert_eq!(listed.providers[0].connections[0].transport, "grpc");
}

/// The generated client, connected to `toold`.
async fn client(
    toold: &crate::http::harness::Toold,
) -> ToolServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Channel::from_shared(toold.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    ToolServiceClient::new(channel)
}

/// `message` as a request with `token`'s bearer.
fn authorized<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let bearer: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", bearer);
    request
}

/// A registration sent with the generated client as `token`; the refusal's code and message.
async fn refusal(
    toold: &crate::http::harness::Toold,
    token: &str,
    registration: ProviderRegistration,
) -> (Code, String) {
    let first = ProvideToolsRequest {
        kind: Some(proto::provide_tools_request::Kind::Register(registration)),
    };
    let requests = futures::stream::iter(vec![first]).chain(futures::stream::pending());
    match client(toold)
        .await
        .provide_tools(authorized(requests, token))
        .await
    {
        Ok(response) => match crate::support::deadline::within(
            crate::support::deadline::STEP,
            "the refusal",
            response.into_inner().message(),
        )
        .await
        {
            Err(status) => (status.code(), status.message().to_owned()),
            Ok(message) => panic!("registered: {message:?}"),
        },
        Err(status) => (status.code(), status.message().to_owned()),
    }
}

use futures::StreamExt;

#[tokio::test]
async fn malformed_declarations_are_invalid_arguments_naming_the_problem() {
    let toold = daemon("");
    let tool = |name: &str, schema: &str| ProvidedToolSpec {
        name: name.into(),
        description: "d".into(),
        input_schema_json: schema.into(),
        ..ProvidedToolSpec::default()
    };
    let cases = vec![
        (
            vec![tool("t", "{not json")],
            "input_schema_json is not JSON",
        ),
        (
            vec![tool("t", r#"{"type": "string"}"#)],
            "\"type\": \"object\"",
        ),
        (
            vec![tool(
                "t",
                r#"{"type": "object", "properties": {"x": {"type": 7}}}"#,
            )],
            "does not compile",
        ),
        (vec![tool(&"x".repeat(70), "")], "must match"),
        (vec![], "declares no tools"),
        (
            vec![ProvidedToolSpec {
                required_permission: "root".into(),
                ..tool("t", "")
            }],
            "required_permission",
        ),
        (
            vec![ProvidedToolSpec {
                interrupt_behavior: "later".into(),
                ..tool("t", "")
            }],
            "interrupt_behavior",
        ),
    ];
    for (tools, says) in cases {
        let registration = ProviderRegistration {
            provider: "p".into(),
            tools,
            global: false,
        };
        let (code, message) = refusal(&toold, AGENT_A, registration.clone()).await;
        assert_eq!(code, Code::InvalidArgument, "{registration:?}: {message}");
        assert!(message.contains(says), "{registration:?}: {message}");
    }
    // A tool declared twice: its name already exists.
    let twice = ProviderRegistration {
        provider: "p".into(),
        tools: vec![tool("t", ""), tool("t", "")],
        global: false,
    };
    let (code, message) = refusal(&toold, AGENT_A, twice).await;
    assert_eq!(code, Code::AlreadyExists, "{message}");
    assert!(message.contains("twice"), "{message}");
    assert_eq!(
        get(&toold, AGENT_A, "/v1/providers").await.body["providers"],
        json!([])
    );
}
