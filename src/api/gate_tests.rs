//! The admission sequence's order and each gate's refusal, without a door.

use super::*;

fn gate(tokens: &[&str], permits: usize) -> Gate {
    Gate {
        status: Arc::new(DaemonStatus::default()),
        auth_tokens: tokens
            .iter()
            .map(|token| {
                let digest = Sha256::digest(token.as_bytes()).into();
                let name = format!("p-{token}");
                (digest, Principal::new(name, crate::permission::Role::Agent))
            })
            .collect(),
        session_tokens: Arc::default(),
        permits: Arc::new(Semaphore::new(permits)),
        request_timeout: Duration::from_secs(900),
        rate: RateLimiter::default(),
        oidc: None,
    }
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    headers
}

fn refusal(admitted: Result<Admission, ServiceError>) -> ErrorCode {
    match admitted {
        Ok(_) => panic!("admitted"),
        Err(err) => err.code,
    }
}

fn admitted(admission: Result<Admission, ServiceError>) -> Admitted {
    match admission {
        Ok(Admission::Admitted(admitted)) => admitted,
        Ok(Admission::Probe) => panic!("admitted as a probe"),
        Err(err) => panic!("refused: {err:?}"),
    }
}

#[tokio::test]
async fn shutting_down_refuses_everything_probes_too() {
    let gate = gate(&[], 1);
    gate.status.shutting_down.store(true, Ordering::Release);
    assert_eq!(
        refusal(
            gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
                .await
        ),
        ErrorCode::ShuttingDown
    );
    assert_eq!(
        refusal(gate.admit(Door::Http, "/healthz", &HeaderMap::new()).await),
        ErrorCode::ShuttingDown
    );
}

#[tokio::test]
async fn probes_pass_auth_and_load_shedding() {
    let gate = gate(&["s3cret"], 0);
    assert!(matches!(
        gate.admit(Door::Http, "/healthz", &HeaderMap::new()).await,
        Ok(Admission::Probe)
    ));
    assert!(matches!(
        gate.admit(
            Door::Grpc,
            "/grpc.health.v1.Health/Check",
            &HeaderMap::new()
        )
        .await,
        Ok(Admission::Probe)
    ));
    assert!(is_http_probe("/healthz") && is_http_probe("/readyz"));
    assert!(!is_http_probe("/v1/sessions") && !is_http_probe("/healthz/x"));
    assert!(is_grpc_probe("/grpc.health.v1.Health/Check"));
    assert!(!is_grpc_probe("/toold.v1.ToolService/CreateSession"));
}

#[tokio::test]
async fn dashboard_files_pass_without_a_token_and_only_over_http() {
    let gate = gate(&["s3cret"], 0);
    for path in ["/ui", "/ui/app.js", "/ui/nonexistent"] {
        assert!(matches!(
            gate.admit(Door::Http, path, &HeaderMap::new()).await,
            Ok(Admission::Probe)
        ));
    }
    for path in ["/uix", "/ui.js", "/v1/ui"] {
        assert_eq!(
            refusal(gate.admit(Door::Http, path, &HeaderMap::new()).await),
            ErrorCode::Unauthenticated
        );
    }
    assert_eq!(
        refusal(gate.admit(Door::Grpc, "/ui", &HeaderMap::new()).await),
        ErrorCode::Unauthenticated
    );
}

#[tokio::test]
async fn auth_comes_before_load_shedding_and_names_the_caller() {
    let gate = gate(&["one", "two"], 0);
    assert_eq!(
        refusal(
            gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
                .await
        ),
        ErrorCode::Unauthenticated
    );
    // Each door says where its token goes.
    let told = async |door| match gate.admit(door, "/x", &HeaderMap::new()).await {
        Err(err) => err.message,
        Ok(_) => panic!("admitted without a token"),
    };
    assert!(
        told(Door::Http)
            .await
            .contains("(Authorization: Bearer TOKEN)")
    );
    assert!(
        told(Door::Grpc)
            .await
            .contains("(metadata authorization: Bearer TOKEN)")
    );
    assert_eq!(
        refusal(
            gate.admit(Door::Http, "/v1/sessions", &bearer("three"))
                .await
        ),
        ErrorCode::Unauthenticated
    );
    // The right token, but no permit left.
    assert_eq!(
        refusal(gate.admit(Door::Http, "/v1/sessions", &bearer("two")).await),
        ErrorCode::Overloaded
    );
    let gate = Gate {
        permits: Arc::new(Semaphore::new(1)),
        ..gate
    };
    let mut first = admitted(gate.admit(Door::Http, "/v1/sessions", &bearer("two")).await);
    assert_eq!(&*first.principal().name, "p-two");
    assert_eq!(first.take_caller().0.as_deref(), Some("two"));
    assert_eq!(
        refusal(gate.admit(Door::Http, "/v1/sessions", &bearer("one")).await),
        ErrorCode::Overloaded
    );
    drop(first);
    admitted(gate.admit(Door::Http, "/v1/sessions", &bearer("one")).await);
}

#[tokio::test]
async fn without_tokens_every_caller_is_anonymous() {
    let gate = gate(&[], 1);
    let mut anyone = admitted(
        gate.admit(Door::Http, "/v1/sessions", &bearer("anything"))
            .await,
    );
    assert_eq!(anyone.principal(), &Principal::local());
    assert_eq!(anyone.take_caller().0, None);
}

#[tokio::test]
async fn a_clients_deadline_shortens_the_servers_and_never_lengthens_it() {
    let gate = gate(&[], 2);
    let mut shorter = admitted(
        gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
            .await,
    );
    shorter.shorten_deadline(Duration::from_millis(250), "grpc-timeout");
    assert_eq!(shorter.deadline.duration, Duration::from_millis(250));
    assert_eq!(shorter.deadline.client_source, Some("grpc-timeout"));
    let mut longer = admitted(
        gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
            .await,
    );
    longer.shorten_deadline(Duration::from_secs(3600), "grpc-timeout");
    assert_eq!(
        longer.deadline,
        Deadline {
            duration: Duration::from_secs(900),
            client_source: None
        }
    );
}

#[tokio::test]
async fn past_the_deadline_the_answer_is_timeout_and_the_permit_comes_back() {
    let gate = gate(&[], 1);
    let mut slow = admitted(
        gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
            .await,
    );
    slow.shorten_deadline(Duration::from_millis(1), "grpc-timeout");
    let err = slow
        .respond_within(std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout);
    assert!(
        err.message.contains("grpc-timeout, 1 ms"),
        "{}",
        err.message
    );
    assert_eq!(gate.permits.available_permits(), 1);
    let quick = admitted(
        gate.admit(Door::Http, "/v1/sessions", &HeaderMap::new())
            .await,
    );
    assert_eq!(quick.respond_within(async { 7 }).await.ok(), Some(7));
}

#[tokio::test]
async fn a_child_session_token_names_its_scoped_principal_with_or_without_auth() {
    for configured in [&["one"][..], &[]] {
        let gate = gate(configured, 4);
        let scoped = Principal::new("agent-a", crate::permission::Role::Agent).scoped_to("sess_c");
        let token = gate.session_tokens.mint(scoped.clone()).unwrap();
        let mut admitted = admitted(
            gate.admit(
                Door::Grpc,
                "/toold.v1.ToolService/ExecuteBatch",
                &bearer(&token),
            )
            .await,
        );
        assert_eq!(admitted.principal(), &scoped);
        assert_eq!(admitted.take_caller().0.as_deref(), Some(token.as_str()));
        // Another token is not it.
        let wrong = format!("{token}x");
        match gate
            .admit(Door::Http, "/v1/sessions", &bearer(&wrong))
            .await
        {
            Err(err) => {
                assert!(!configured.is_empty());
                assert_eq!(err.code, ErrorCode::Unauthenticated);
            }
            Ok(admission) => {
                let Admission::Admitted(admitted) = admission else {
                    panic!("a probe")
                };
                assert!(configured.is_empty());
                assert_eq!(admitted.principal(), &Principal::local());
            }
        }
    }
}

#[tokio::test]
async fn a_principal_over_its_rate_is_refused_after_auth_and_before_shedding() {
    let gate = Gate {
        rate: RateLimiter::new(1),
        ..gate(&["one", "two"], 1)
    };
    let first = admitted(gate.admit(Door::Http, "/v1/sessions", &bearer("one")).await);
    drop(first);
    // Over its rate: refused as such, not as overloaded, and no permit is taken.
    assert_eq!(
        refusal(
            gate.admit(
                Door::Grpc,
                "/toold.v1.ToolService/ListTools",
                &bearer("one")
            )
            .await
        ),
        ErrorCode::LimitExceeded
    );
    assert_eq!(gate.permits.available_permits(), 1);
    // A wrong token is still unauthenticated; another principal and the probes pass.
    assert_eq!(
        refusal(
            gate.admit(Door::Http, "/v1/sessions", &bearer("three"))
                .await
        ),
        ErrorCode::Unauthenticated
    );
    admitted(gate.admit(Door::Http, "/v1/sessions", &bearer("two")).await);
    assert!(matches!(
        gate.admit(Door::Http, "/healthz", &HeaderMap::new()).await,
        Ok(Admission::Probe)
    ));
}
