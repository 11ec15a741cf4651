//! `skill`: listing at registration, loading, name rules, shadowing and symlink containment.

use std::os::unix::fs::symlink;

use serde_json::json;
use toold::tool::ErrorKind;

use crate::misc::harness::{Env, EnvOptions, execution_message, validation_message, write};

struct Skills {
    _root: tempfile::TempDir,
    env: Env,
}

/// Two skill directories: `first` holds pdf, review and some things that are not skills;
/// `second` holds another pdf (shadowed) and deploy.
fn skills() -> Skills {
    let root = tempfile::tempdir().unwrap();
    let first = root.path().join("first");
    let second = root.path().join("second");
    let outside = root.path().join("outside");
    write(
        &first,
        "pdf/SKILL.md",
        "---\nname: pdf\ndescription: \"Fill in PDF forms\"\n---\n# PDF\n\nUse scripts/fill.py.\n",
    );
    write(&first, "review/SKILL.md", "No front matter here.\n");
    write(
        &first,
        ".hidden/SKILL.md",
        "---\ndescription: hidden\n---\nx",
    );
    std::fs::create_dir_all(first.join("empty-folder")).unwrap();
    write(&first, "not-a-folder.md", "x");
    write(
        &second,
        "pdf/SKILL.md",
        "---\ndescription: the shadowed one\n---\nshadowed",
    );
    write(
        &second,
        "deploy/SKILL.md",
        "---\ndescription: Ship it\n---\nDeploy steps.",
    );
    // A skill folder that is a symlink out of its directory, and a SKILL.md that is one.
    write(
        &outside,
        "escape/SKILL.md",
        "---\ndescription: escaped\n---\nsecret",
    );
    symlink(outside.join("escape"), first.join("escape")).unwrap();
    std::fs::create_dir_all(first.join("linked")).unwrap();
    symlink("/etc/passwd", first.join("linked/SKILL.md")).unwrap();
    // A symlink that stays inside the directory is fine.
    symlink(first.join("pdf"), first.join("pdf-alias")).unwrap();
    let env = Env::with(EnvOptions {
        skill_dirs: vec![first, second],
        ..EnvOptions::default()
    });
    Skills { _root: root, env }
}

#[tokio::test]
async fn the_description_lists_the_skills_found() {
    let skills = skills();
    let description = skills.env.tool("skill").spec().description.clone();
    let listed: Vec<&str> = description
        .lines()
        .filter(|l| l.starts_with("- "))
        .collect();
    assert_eq!(
        listed,
        vec![
            "- deploy: Ship it",
            "- pdf: Fill in PDF forms",
            "- pdf-alias: Fill in PDF forms",
            "- review",
        ],
        "{description}"
    );
}

#[tokio::test]
async fn a_skill_loads_without_front_matter_and_with_args() {
    let skills = skills();
    let result = skills
        .env
        .call("skill", json!({"skill": "pdf", "args": "form.pdf"}))
        .await;
    assert!(!result.is_error, "{}", result.output);
    let text = &result.output;
    assert!(
        text.starts_with("Skill \"pdf\"\nBase directory for this skill: "),
        "{text}"
    );
    assert!(
        text.contains("/first/pdf\n\n# PDF\n\nUse scripts/fill.py.\n\nARGUMENTS: form.pdf"),
        "{text}"
    );
    assert!(
        !text.contains("description:") && !text.contains("shadowed"),
        "{text}"
    );
    assert_eq!(
        result.structured.as_ref().unwrap()["description"],
        json!("Fill in PDF forms")
    );

    let plain = skills.env.call("skill", json!({"skill": "review"})).await;
    assert!(
        plain.output.ends_with("\n\nNo front matter here."),
        "{}",
        plain.output
    );
    let deploy = skills
        .env
        .call("skill", json!({"skill": "deploy", "args": "  "}))
        .await;
    assert!(
        deploy.output.ends_with("\n\nDeploy steps."),
        "{}",
        deploy.output
    );
}

#[tokio::test]
async fn names_that_are_not_plain_folder_names_are_refused() {
    let skills = skills();
    for name in [
        "../outside/escape",
        "first/pdf",
        "..",
        ".hidden",
        "/etc",
        "pdf/../review",
        "a\\b",
    ] {
        let message = validation_message(skills.env.run("skill", json!({"skill": name})).await);
        assert!(message.contains("is not a skill name"), "{name}: {message}");
    }
    let message = validation_message(skills.env.run("skill", json!({"skill": "nope"})).await);
    assert_eq!(
        message,
        "unknown skill \"nope\"; available skills: deploy, pdf, pdf-alias, review"
    );
    for name in ["empty-folder", "not-a-folder.md"] {
        let message = validation_message(skills.env.run("skill", json!({"skill": name})).await);
        assert!(message.starts_with("unknown skill"), "{name}: {message}");
    }
    let cases = [
        json!({}),
        json!({"skill": ""}),
        json!({"skill": 1}),
        json!({"skill": "x".repeat(101)}),
        json!({"skill": "pdf", "args": 3}),
        json!({"skill": "pdf", "extra": 1}),
    ];
    for input in cases {
        let result = skills.env.call("skill", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}: {}",
            result.output
        );
    }
}

#[tokio::test]
async fn symlinks_out_of_the_skill_directory_are_refused() {
    let skills = skills();
    for name in ["escape", "linked"] {
        let message = execution_message(skills.env.run("skill", json!({"skill": name})).await);
        assert!(
            message.contains("outside its skill directory"),
            "{name}: {message}"
        );
    }
    let inside = skills
        .env
        .run("skill", json!({"skill": "pdf-alias"}))
        .await
        .unwrap();
    assert!(inside.text.contains("# PDF"), "{}", inside.text);
}

#[tokio::test]
async fn oversized_or_non_utf8_skills_are_refused() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "big/SKILL.md", &"x".repeat(1024 * 1024 + 1));
    std::fs::create_dir_all(root.path().join("latin1")).unwrap();
    std::fs::write(root.path().join("latin1/SKILL.md"), b"caf\xe9").unwrap();
    let env = Env::with(EnvOptions {
        skill_dirs: vec![root.path().to_owned()],
        ..EnvOptions::default()
    });
    let message = execution_message(env.run("skill", json!({"skill": "big"})).await);
    assert!(message.contains("skills are at most 1048576"), "{message}");
    let message = execution_message(env.run("skill", json!({"skill": "latin1"})).await);
    assert!(message.contains("is not valid UTF-8"), "{message}");
}

#[tokio::test]
async fn without_skills_the_tool_is_not_offered() {
    let missing = tempfile::tempdir().unwrap();
    let env = Env::with(EnvOptions {
        skill_dirs: vec![missing.path().join("does-not-exist")],
        ..EnvOptions::default()
    });
    assert!(env.pool().resolve("skill").is_err());
    let result = env.call("skill", json!({"skill": "pdf"})).await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::UnknownTool),
        "{}",
        result.output
    );
}
