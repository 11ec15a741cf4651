//! The dashboard's files over HTTP from the real daemon: served without a token (the API
//! still wants one), each with its content type and a Content-Security-Policy allowing only
//! this origin, and no URL of anywhere else in any of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::StatusCode;

use crate::http::harness::Toold;

const TOKEN: &str = "ui-assets-token";

/// Every `/ui/…` path a text names (the page's `src`/`href`, a script's `import`).
fn referenced(text: &str) -> Vec<String> {
    text.split('"')
        .filter(|piece| piece.starts_with("/ui/"))
        .map(str::to_owned)
        .collect()
}

/// GET without a token: status, content type, CSP, body.
async fn fetch(toold: &Toold, path: &str) -> (StatusCode, String, String, String) {
    let response = toold
        .client
        .get(format!("{}{path}", toold.base))
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (content_type, csp) = (header("content-type"), header("content-security-policy"));
    (
        response.status(),
        content_type,
        csp,
        response.text().await.unwrap(),
    )
}

#[tokio::test]
async fn the_files_are_served_without_a_token_with_a_strict_policy_and_nothing_from_elsewhere() {
    let toold = Toold::start_with(
        Arc::new(tempfile::tempdir().unwrap()),
        &["--auth-token", TOKEN],
    );
    let mut files = BTreeMap::new();
    let mut queue = vec!["/ui".to_owned()];
    while let Some(path) = queue.pop() {
        if files.contains_key(&path) {
            continue;
        }
        let (status, content_type, csp, body) = fetch(&toold, &path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        for directive in [
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("http"),
            "{path}: {csp}"
        );
        queue.extend(referenced(&body));
        files.insert(path, (content_type, body));
    }
    let types: BTreeMap<&str, &str> = files
        .iter()
        .map(|(path, (content_type, _))| (path.as_str(), content_type.as_str()))
        .collect();
    assert_eq!(
        types,
        BTreeMap::from([
            ("/ui", "text/html; charset=utf-8"),
            ("/ui/app.css", "text/css; charset=utf-8"),
            ("/ui/app.js", "text/javascript; charset=utf-8"),
            ("/ui/tail.js", "text/javascript; charset=utf-8"),
            ("/ui/audit.js", "text/javascript; charset=utf-8"),
        ])
    );
    for (path, (_, body)) in &files {
        for scheme in ["http://", "https://", "//cdn", "@import", "url("] {
            assert!(!body.contains(scheme), "{path} names {scheme}");
        }
        // No inline script or style the policy would have to allow.
        assert!(
            !body.contains(" style=\"") && !body.contains("onclick="),
            "{path}"
        );
    }
    let html = &files["/ui"].1;
    assert!(
        !html.contains("<script>") && !html.contains("<style"),
        "no inline script or style"
    );
    // The data behind the page still needs the token; an unknown file is a 404.
    let (status, ..) = fetch(&toold, "/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, ..) = fetch(&toold, "/v1/approvals").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, ..) = fetch(&toold, "/ui/nothing.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let post = toold
        .client
        .post(format!("{}/ui", toold.base))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
}
