//! Input checking of `bash`, as a table.

use serde_json::json;

use super::*;

#[test]
fn bad_inputs_are_refused_with_clear_messages() {
    let long = "x".repeat(MAX_COMMAND_BYTES + 1);
    let cases = [
        (json!({}), "command must be a string"),
        (json!({"command": 5}), "command must be a string"),
        (json!({"command": ""}), "command is empty"),
        (json!({"command": "  \n\t"}), "command is empty"),
        (json!({"command": "ls\u{0}rm"}), "NUL byte"),
        (json!({"command": long}), "the limit is 100000 bytes"),
        (
            json!({"command": "ls", "timeout": 0}),
            "timeout 0 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": 600_001}),
            "timeout 600001 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": -5}),
            "timeout -5 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": 1.5}),
            "timeout 1.5 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": "100"}),
            "timeout \"100\" is out of range",
        ),
        (
            json!({"command": "ls", "run_in_background": "yes"}),
            "run_in_background must be true or false",
        ),
    ];
    for (input, expected) in cases {
        match parse_input(&input) {
            Err(ToolError::Validation(message)) => {
                assert!(message.contains(expected), "{input}: {message}");
            }
            other => panic!("{input}: expected a validation error, got {other:?}"),
        }
    }
}

#[test]
fn good_inputs_get_defaults() {
    let parsed = parse_input(&json!({"command": "ls"})).unwrap();
    assert_eq!(parsed.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert!(!parsed.run_in_background);
    let parsed =
        parse_input(&json!({"command": "ls", "timeout": 600_000.0, "run_in_background": true}))
            .unwrap();
    assert_eq!(parsed.timeout_ms, MAX_TIMEOUT_MS);
    assert!(parsed.run_in_background);
    assert_eq!(
        parse_input(&json!({"command": "ls", "timeout": 1}))
            .unwrap()
            .timeout_ms,
        1
    );
}

#[test]
fn flags_follow_the_classifier_and_fail_closed() {
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let spec = tool.spec();
    let session = SessionState::new(crate::session::SessionConfig::new("s", "/tmp"));
    let read = json!({"command": "git status"});
    assert!(spec.is_read_only(&read, &session));
    assert!(spec.is_concurrency_safe(&read, &session));
    assert!(!spec.is_destructive(&read, &session));
    assert_eq!(
        spec.required_permission(&read, &session),
        PermissionLevel::ReadOnly
    );
    let write = json!({"command": "rm -rf build"});
    assert!(!spec.is_read_only(&write, &session));
    assert!(spec.is_destructive(&write, &session));
    assert_eq!(
        spec.required_permission(&write, &session),
        PermissionLevel::DangerFullAccess
    );
    // No command at all: the classifier errs, the flags take their safe side.
    let missing = json!({"cmd": "ls"});
    assert!(!spec.is_read_only(&missing, &session));
    assert!(!spec.is_concurrency_safe(&missing, &session));
    assert!(spec.is_destructive(&missing, &session));
    assert_eq!(
        spec.required_permission(&missing, &session),
        PermissionLevel::DangerFullAccess
    );
}
