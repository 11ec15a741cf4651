//! What `bash` returns for ordinary commands, bad input, the working directory that persists,
//! permissions, and output large enough to be offloaded.

use serde_json::{Value, json};
use toold::dispatch::ResultStore;
use toold::permission::PermissionLevel;
use toold::tool::{ContextUpdate, ErrorKind};

use crate::shell::harness::*;
use crate::support::child_process::{in_child_process, run_in_child_process};

struct Case {
    command: &'static str,
    /// The whole output, when it is known exactly.
    output: Option<&'static str>,
    /// Pieces the output must contain.
    contains: &'static [&'static str],
    exit_code: Option<i64>,
}

const CASES: &[Case] = &[
    Case {
        command: "echo hello",
        output: Some("hello\n"),
        contains: &[],
        exit_code: Some(0),
    },
    // One pipe for both streams: the order is the order of writing.
    Case {
        command: "echo out; echo err >&2; echo out2",
        output: Some("out\nerr\nout2\n"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "printf 'no newline'",
        output: Some("no newline"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "true",
        output: Some("(no output)"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "echo \"[$1][$#]\"",
        output: Some("[][0]\n"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "cat",
        output: Some("(no output)"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "echo 'é ☃ 日本'",
        output: Some("é ☃ 日本\n"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "echo partial; exit 3",
        output: Some("ExecutionError: partial\nexit code: 3"),
        contains: &[],
        exit_code: Some(3),
    },
    Case {
        command: "false",
        output: Some("ExecutionError: exit code: 1"),
        contains: &[],
        exit_code: Some(1),
    },
    Case {
        command: "ls /nonexistent-toold-test",
        output: None,
        contains: &["No such file", "\nexit code: 2"],
        exit_code: Some(2),
    },
    Case {
        command: "no_such_command_toold",
        output: None,
        contains: &["command not found", "exit code: 127"],
        exit_code: Some(127),
    },
    Case {
        command: "if then",
        output: None,
        contains: &["syntax error", "exit code: 2"],
        exit_code: Some(2),
    },
    Case {
        command: "kill -9 $$",
        output: Some("ExecutionError: killed by signal 9"),
        contains: &[],
        exit_code: None,
    },
    Case {
        command: "cat <<EOF\nline one\n$(echo two)\nEOF",
        output: Some("line one\ntwo\n"),
        contains: &[],
        exit_code: Some(0),
    },
    Case {
        command: "for i in 1 2 3; do printf $i; done | wc -c",
        output: Some("3\n"),
        contains: &[],
        exit_code: Some(0),
    },
    // SIGPIPE is back to its default in the child: `yes` dies quietly when `head` is done.
    Case {
        command: "yes | head -n 2",
        output: Some("y\ny\n"),
        contains: &[],
        exit_code: Some(0),
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_give_their_output_and_exit_code() {
    let shell = Shell::new();
    for case in CASES {
        let result = shell.bash(case.command).await;
        let failed = case.exit_code != Some(0);
        assert_eq!(
            result.is_error, failed,
            "{}: {}",
            case.command, result.output
        );
        if failed {
            assert_eq!(
                result.error_kind,
                Some(ErrorKind::Execution),
                "{}",
                case.command
            );
        }
        if let Some(output) = case.output {
            assert_eq!(result.output, output, "{}", case.command);
        }
        for piece in case.contains {
            assert!(
                result.output.contains(piece),
                "{}: {:?}",
                case.command,
                result.output
            );
        }
        assert_eq!(
            result.metadata["exit_code"],
            json!(case.exit_code),
            "{}",
            case.command
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_runs() {
    let shell = Shell::new();
    let marker = shell.path("ran");
    let touch = format!("touch {}", marker.display());
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        ("bash", json!({}), ErrorKind::InputValidation, "command"),
        (
            "bash",
            json!({"command": 5}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "bash",
            json!({"command": ["ls"]}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "bash",
            json!({"command": touch, "timeout": 0}),
            ErrorKind::InputValidation,
            "minimum",
        ),
        (
            "bash",
            json!({"command": touch, "timeout": 600_001}),
            ErrorKind::InputValidation,
            "maximum",
        ),
        (
            "bash",
            json!({"command": touch, "timeout": "100"}),
            ErrorKind::InputValidation,
            "integer",
        ),
        (
            "bash",
            json!({"command": touch, "run_in_background": "yes"}),
            ErrorKind::InputValidation,
            "boolean",
        ),
        (
            "bash",
            json!({"command": touch, "extra": 1}),
            ErrorKind::InputValidation,
            "extra",
        ),
        (
            "bash",
            json!({"command": ""}),
            ErrorKind::Validation,
            "command is empty",
        ),
        (
            "bash",
            json!({"command": " \n"}),
            ErrorKind::Validation,
            "command is empty",
        ),
        (
            "bash",
            json!({"command": format!("{touch}\u{0}")}),
            ErrorKind::Validation,
            "NUL byte",
        ),
        (
            "bash",
            json!({"command": format!("{touch} {}", "x".repeat(100_000))}),
            ErrorKind::Validation,
            "the limit is 100000 bytes",
        ),
        (
            "bash_output",
            json!({}),
            ErrorKind::InputValidation,
            "task_id",
        ),
        (
            "bash_output",
            json!({"task_id": 7}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "bash_output",
            json!({"task_id": "bash_999"}),
            ErrorKind::Validation,
            "unknown task \"bash_999\"; this session has no background tasks",
        ),
        (
            "bash_output",
            json!({"task_id": "nonsense"}),
            ErrorKind::Validation,
            "unknown task \"nonsense\"",
        ),
        (
            "bash_output",
            json!({"task_id": ""}),
            ErrorKind::Validation,
            "task_id is empty",
        ),
        (
            "kill_shell",
            json!({"task_id": "bash_1"}),
            ErrorKind::Validation,
            "unknown task \"bash_1\"",
        ),
        (
            "kill_shell",
            json!({"task_id": null}),
            ErrorKind::InputValidation,
            "string",
        ),
    ];
    for (tool, input, kind, message) in cases {
        let result = shell.call(tool, input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(kind),
            "{tool} {input}: {}",
            result.output
        );
        assert!(
            result.output.starts_with(kind.prefix()),
            "{}",
            result.output
        );
        assert!(
            result.output.contains(message),
            "{tool} {input}: {}",
            result.output
        );
    }
    assert!(!marker.exists(), "a refused call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cd_persists_to_the_next_call() {
    let shell = Shell::new();
    std::fs::create_dir_all(shell.path("sub/deeper")).unwrap();
    let result = shell.bash("cd sub").await;
    assert!(!result.is_error, "{}", result.output);
    assert_eq!(shell.session.shell_cwd(), shell.path("sub"));
    let result = shell.bash("pwd").await;
    assert_eq!(result.output, format!("{}\n", shell.path("sub").display()));
    // The alias, a relative cd, and a failing command after the cd: the cd still counts.
    let result = shell
        .call("Bash", json!({"command": "cd deeper && false"}))
        .await;
    assert!(result.is_error);
    assert_eq!(
        shell.bash("pwd").await.output,
        format!("{}\n", shell.path("sub/deeper").display())
    );
    // Printing something that looks like a path changes nothing.
    shell.bash("echo /etc; echo /etc >&2").await;
    assert_eq!(shell.session.shell_cwd(), shell.path("sub/deeper"));
    // The directory disappears: the next call runs in the workspace and says so.
    shell.bash("cd ..").await;
    std::fs::remove_dir_all(shell.path("sub")).unwrap();
    let result = shell.bash("pwd").await;
    assert!(
        result.output.contains("no longer exists"),
        "{}",
        result.output
    );
    assert!(
        result
            .output
            .ends_with(&format!("{}\n", shell.root().display())),
        "{}",
        result.output
    );
    assert_eq!(shell.session.shell_cwd(), shell.root());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_cd_does_not_move_the_shell() {
    let shell = Shell::new();
    std::fs::create_dir(shell.path("sub")).unwrap();
    let result = shell
        .call(
            "bash",
            json!({"command": "cd sub && sleep 30", "timeout": 200}),
        )
        .await;
    assert_eq!(result.error_kind, Some(ErrorKind::Timeout));
    assert!(
        result.output.ends_with(
            "command timed out after 200 ms; it and every process it started were killed"
        ),
        "{}",
        result.output
    );
    assert_eq!(result.metadata["timed_out"], json!(true));
    assert_eq!(shell.session.shell_cwd(), shell.root());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_need_only_read_permission() {
    let shell = Shell::with_mode(PermissionLevel::ReadOnly);
    let result = shell
        .bash("echo visible; git --version >/dev/null 2>&1; pwd")
        .await;
    assert!(!result.is_error, "{}", result.output);
    let marker = shell.path("written");
    let result = shell.bash(&format!("ls; touch {}", marker.display())).await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::PermissionDenied),
        "{}",
        result.output
    );
    let result = shell
        .bash(&format!("echo $(touch {})", marker.display()))
        .await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::PermissionDenied),
        "{}",
        result.output
    );
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_outside_the_workspace_are_refused_in_read_only_mode() {
    let shell = Shell::with_mode(PermissionLevel::ReadOnly);
    std::fs::write(shell.path("inside.txt"), "inside\n").unwrap();
    let result = shell.bash("cat /etc/hostname").await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::PermissionDenied),
        "{}",
        result.output
    );
    let result = shell.bash("cat inside.txt").await;
    assert!(!result.is_error, "{}", result.output);
    assert_eq!(result.output, "inside\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_authorised_for_the_workspace_is_checked_again_when_it_runs() {
    // Outside a dispatcher the context is authorised at the session's mode: read-only.
    let shell = Shell::with_mode(PermissionLevel::ReadOnly);
    let tool = shell.registry.get("bash").unwrap().tool.clone();
    let ctx = toold::tool::ToolContext::detached(shell.session.clone());
    let refused = tool
        .execute(json!({"command": "cat /etc/hostname"}), &ctx)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("\"/etc/hostname\" is outside the workspace"),
        "{refused}"
    );
    let inside = tool.execute(json!({"command": "pwd"}), &ctx).await.unwrap();
    assert!(!inside.is_error, "{}", inside.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_shell_directory_falls_back_to_the_sessions_workspace() {
    // The context's copy of the workspace is not what decides: the session's is.
    let shell = Shell::new();
    std::fs::create_dir(shell.path("sub")).unwrap();
    shell.session.apply(&[ContextUpdate::ShellCwd {
        path: shell.path("sub"),
    }]);
    std::fs::remove_dir(shell.path("sub")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let tool = shell.registry.get("bash").unwrap().tool.clone();
    let mut ctx = toold::tool::ToolContext::detached(shell.session.clone());
    ctx.working_directory = std::sync::Arc::from(elsewhere.path());
    let output = tool.execute(json!({"command": "pwd"}), &ctx).await.unwrap();
    assert!(output.text.contains("no longer exists"), "{}", output.text);
    assert!(
        output
            .text
            .ends_with(&format!("{}\n", shell.root().display())),
        "{}",
        output.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_output_is_offloaded_with_head_tail_and_exit_code() {
    let shell = Shell::new();
    let result = shell
        .bash("seq 1 20000; echo done-marker >&2; exit 4")
        .await;
    let offloaded = result.offloaded.as_ref().expect("the output was offloaded");
    assert!(offloaded.total_chars > 30_000);
    assert!(
        result.output.starts_with("ExecutionError: 1\n2\n3\n"),
        "{}",
        &result.output[..80]
    );
    assert!(
        result.output.contains("done-marker\nexit code: 4"),
        "{}",
        result.output
    );
    assert!(result.output.contains(&offloaded.result_id));
    assert!(result.output.len() < 5_000, "the preview is short");
    assert_eq!(result.metadata["exit_code"], json!(4));
    let page = shell
        .results
        .read(&offloaded.result_id, 0, offloaded.total_chars)
        .await
        .unwrap();
    assert!(
        page.content.contains("\n10000\n10001\n"),
        "the stored output is whole"
    );
    assert!(
        page.content
            .ends_with("19999\n20000\ndone-marker\nexit code: 4")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_beyond_memory_is_spilled_and_stored_whole() {
    let shell = Shell::new();
    // 40 MB of `x` framed by markers; past 1 MiB the output goes to a spill file.
    let command =
        "echo head-marker; head -c 40000000 /dev/zero | tr '\\0' x; echo; echo tail-marker";
    let result = shell.bash(command).await;
    assert!(!result.is_error, "{}", &result.output[..200]);
    assert_eq!(result.metadata["omitted_bytes"], json!(0));
    assert_eq!(result.metadata["output_bytes"], json!(40_000_000 + 25));
    assert!(
        result.output.starts_with("head-marker\n"),
        "{}",
        &result.output[..100]
    );
    assert!(
        result.output.contains("tail-marker\n"),
        "{}",
        &result.output[result.output.len() - 400..]
    );
    assert!(result.output.len() < 5_000, "the preview is short");
    let offloaded = result.offloaded.as_ref().expect("offloaded");
    assert_eq!(offloaded.total_chars, 40_000_000 + 25, "stored whole");
    let middle = shell
        .results
        .read(&offloaded.result_id, 20 * 1024 * 1024, 10)
        .await
        .unwrap();
    assert_eq!(middle.content, "xxxxxxxxxx");
    let end = shell
        .results
        .read(&offloaded.result_id, 40_000_025 - 13, 100)
        .await
        .unwrap();
    assert_eq!(end.content, "\ntail-marker\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_environment_is_not_handed_on() {
    // The daemon's environment holds a secret and a CDPATH (which would send a relative `cd`
    // outside the directory the permission check resolved it in, here to /etc). They are set
    // on a child process that runs this test again, never in this process, whose other tests
    // spawn processes of their own meanwhile.
    if !in_child_process() {
        run_in_child_process(
            "shell::behaviour::the_daemon_environment_is_not_handed_on",
            &[("TOOLD_TEST_SECRET_TOKEN", "hunter2"), ("CDPATH", "/")],
        );
        return;
    }
    assert_eq!(std::env::var("CDPATH").as_deref(), Ok("/"));
    let shell = Shell::new();
    let result = shell
        .bash("echo \"[${TOOLD_TEST_SECRET_TOKEN:-unset}]\"; echo ${HOME:+home}")
        .await;
    assert_eq!(result.output, "[unset]\nhome\n");
    let result = shell.bash("cd etc 2>/dev/null; pwd").await;
    assert_eq!(result.output, format!("{}\n", shell.root().display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cwd_update_is_a_context_update_of_the_call() {
    // Run the tool outside the dispatcher: the cd comes back as an update, the session is
    // untouched until someone applies it.
    let shell = Shell::new();
    std::fs::create_dir(shell.path("sub")).unwrap();
    let tool = shell.registry.get("bash").unwrap().tool.clone();
    let ctx = toold::tool::ToolContext::detached(shell.session.clone());
    let output = tool
        .execute(json!({"command": "cd sub"}), &ctx)
        .await
        .unwrap();
    assert_eq!(
        output.context_updates,
        vec![ContextUpdate::ShellCwd {
            path: shell.path("sub")
        }]
    );
    assert_eq!(shell.session.shell_cwd(), shell.root());
    let unchanged = tool.execute(json!({"command": "ls"}), &ctx).await.unwrap();
    assert!(unchanged.context_updates.is_empty());
}
