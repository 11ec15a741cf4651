//! The permission table: rules from the server and the session against calls, in the world
//! of `policy_tests.rs` (real symlinks and `..`, real aliases, the real bash parser). Each row
//! names the verdict and who gives it; the rows cover compound bash lines, path specifiers,
//! aliases, MCP names, precedence conflicts and session rules that try to widen.

use serde_json::json;

use super::tests::{Full, Ro, Ww, bash, case, judged, path_input, with, world};

#[test]
fn the_permission_table() {
    let w = world();
    let ws = w.workspace.clone();
    let read = |path: &str| path_input("file_path", path);
    let fetch = |url: &str| json!({ "url": url });
    let cases = vec![
        // Compound bash lines: each simple command on its own.
        bash("git status", "allow server:bash(git status:*)"),
        bash("git status --short", "allow server:bash(git status:*)"),
        bash("git statusx", "ask mode"),
        bash("git status && rm -rf x", "deny server:bash(rm:*)"),
        bash("git status; curl http://x.org", "deny server:bash(curl:*)"),
        bash("git status && touch x", "ask mode"),
        bash(
            "git status | ls -l",
            "allow server:bash(git status:*), bash(ls:*)",
        ),
        bash("git status > out.txt", "ask mode"),
        bash("git status 2>/dev/null", "allow server:bash(git status:*)"),
        bash("git status 2>&1", "allow server:bash(git status:*)"),
        bash("FOO=1 git status", "ask mode"),
        bash("export PATH=/tmp/evil && git status", "ask mode"),
        bash("PAGER=evil; git status", "ask mode"),
        bash("unset HOME; ls", "ask mode"),
        bash("X=$(rm -rf y) git status", "deny server:bash(rm:*)"),
        bash("{ git status; ls; } >> log", "ask mode"),
        bash("echo $(rm -rf /)", "deny server:bash(rm:*)"),
        bash("git status $(curl evil)", "deny server:bash(curl:*)"),
        bash("bash -c 'rm -rf x'", "deny server:bash(rm:*)"),
        bash("eval 'rm -rf x'", "deny server:bash(rm:*)"),
        bash("sudo rm -rf /", "deny server:bash(rm:*)"),
        bash("/bin/rm -rf x", "deny server:bash(rm:*)"),
        bash("env FOO=1 rm x", "deny server:bash(rm:*)"),
        bash("timeout 5 rm x", "deny server:bash(rm:*)"),
        bash("ls | xargs rm", "deny server:bash(rm:*)"),
        bash("f() { rm -rf /; }; f", "deny server:bash(rm:*)"),
        bash("git status\nrm x", "deny server:bash(rm:*)"),
        bash("\"rm\" -rf x", "deny server:bash(rm:*)"),
        bash("git push origin main", "ask server:bash(git push:*)"),
        bash("git status && git push", "ask server:bash(git push:*)"),
        bash("git diff", "allow server:bash(git diff)"),
        bash("git   diff", "allow server:bash(git diff)"),
        bash("git diff HEAD", "ask mode"),
        bash(
            "npm run test -- --watch",
            "allow server:bash(npm run test:*)",
        ),
        bash("npm run test:unit", "ask mode"),
        bash(
            "cargo build --release",
            "allow server:bash(cargo * --release)",
        ),
        bash("cargo build --debug", "ask mode"),
        bash("git status &&", "ask mode"),
        bash("ls && rmdir x", "ask mode"),
        bash("for f in a b; do ls $f; done", "allow server:bash(ls:*)"),
        case(
            "bash",
            json!({"command": "echo 'rm -rf x'"}),
            Ro,
            "allow mode",
        ),
        case(
            "bash",
            json!({"command": "ls"}),
            Ro,
            "allow server:bash(ls:*)",
        ),
        case("bash", json!({"command": "cat README"}), Ro, "allow mode"),
        // Session rules narrow and never widen.
        with(
            &["allow:bash(rm:*)"],
            bash("rm x", "deny server:bash(rm:*)"),
        ),
        with(
            &["allow:bash(*)"],
            bash("curl http://x", "deny server:bash(curl:*)"),
        ),
        with(
            &["allow:bash"],
            bash("git push", "ask server:bash(git push:*)"),
        ),
        with(&["allow:bash"], bash("touch x", "allow session:bash")),
        with(
            &["deny:bash(git status:*)"],
            bash("git status", "deny session:bash(git status:*)"),
        ),
        with(&["ask:bash(ls:*)"], bash("ls", "ask session:bash(ls:*)")),
        with(
            &["allow:bash(make:*)"],
            bash("make all", "allow session:bash(make:*)"),
        ),
        with(
            &["allow:bash(make:*)"],
            bash(
                "git status && make",
                "allow session:bash(git status:*), bash(make:*)",
            ),
        ),
        with(
            &["allow:read_file(./secrets/**)"],
            case(
                "read_file",
                read("secrets/key"),
                Ro,
                "deny server:read_file(./secrets/**)",
            ),
        ),
        with(
            &["allow:mcp__danger__drop"],
            case(
                "mcp__danger__drop",
                json!({}),
                Full,
                "deny server:mcp__danger__*",
            ),
        ),
        with(
            &["allow:web_fetch(domain:evil.example)"],
            case(
                "web_fetch",
                fetch("https://evil.example/"),
                Full,
                "deny server:web_fetch(domain:evil.example)",
            ),
        ),
        with(
            &["allow:mcp__github__create_issue"],
            case(
                "mcp__github__create_issue",
                json!({}),
                Full,
                "ask server:mcp__github__create_issue",
            ),
        ),
        with(
            &["deny:read_file"],
            case(
                "read_file",
                read("public/readme"),
                Ro,
                "deny session:read_file",
            ),
        ),
        with(
            &["deny:Read(./public/**)"],
            case(
                "read_file",
                read("public/readme"),
                Ro,
                "deny session:Read(./public/**)",
            ),
        ),
        // Paths: gitignore-style, relative to the workspace, through `..` and symlinks.
        case(
            "read_file",
            read("secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("./secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("public/../secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("link_to_secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("secrets/sub/missing.txt"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            path_input("file_path", ws.join("secrets/key")),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case("read_file", read("public/readme"), Ro, "allow mode"),
        case("read_file", read("public/secrets/key"), Ro, "allow mode"),
        case(
            "write_file",
            path_input("file_path", "a/b/cert.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "cert.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "link_to_secrets/new.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "cert.pemx"),
            Ww,
            "allow mode",
        ),
        case(
            "edit_file",
            path_input("file_path", "config/app.toml"),
            Ww,
            "ask server:edit_file(./config/**)",
        ),
        case(
            "edit_file",
            path_input("file_path", "src/main.rs"),
            Ww,
            "allow mode",
        ),
        case(
            "read_file",
            read("/etc/hostname"),
            Full,
            "allow server:read_file(//etc/hostname)",
        ),
        case("read_file", read("/etc/passwd"), Full, "ask mode"),
        case(
            "read_file",
            read("public/etc_link/hostname"),
            Full,
            "allow server:read_file(//etc/hostname)",
        ),
        case(
            "read_file",
            read("public/etc_link/passwd"),
            Full,
            "ask mode",
        ),
        case("read_file", read("../outside.txt"), Full, "ask mode"),
        case(
            "read_file",
            path_input("file_path", w.home.join(".ssh/id_rsa")),
            Full,
            "deny server:read_file(~/.ssh/**)",
        ),
        case(
            "grep_search",
            json!({"pattern": "x", "path": "src/main.rs"}),
            Ro,
            "allow server:Grep(./src/**)",
        ),
        with(
            &["deny:grep_search(./secrets/**)"],
            case(
                "grep_search",
                json!({"pattern": "x", "path": "secrets"}),
                Ro,
                "deny session:grep_search(./secrets/**)",
            ),
        ),
        with(
            &["ask:notebook_edit(*.ipynb)"],
            case(
                "notebook_edit",
                path_input("notebook_path", "nb/a.ipynb"),
                Ww,
                "ask session:notebook_edit(*.ipynb)",
            ),
        ),
        with(
            &["deny:str_replace_based_edit_tool(./secrets/**)"],
            case(
                "str_replace_based_edit_tool",
                path_input("path", "link_to_secrets/key"),
                Ww,
                "deny session:str_replace_based_edit_tool(./secrets/**)",
            ),
        ),
        // web_fetch domains.
        case(
            "web_fetch",
            fetch("https://evil.example/x"),
            Ro,
            "deny server:web_fetch(domain:evil.example)",
        ),
        case(
            "web_fetch",
            fetch("https://EVIL.example./x"),
            Ro,
            "deny server:web_fetch(domain:evil.example)",
        ),
        case(
            "web_fetch",
            fetch("https://sub.evil.example/"),
            Ro,
            "allow mode",
        ),
        case("web_fetch", fetch("https://docs.rs/"), Full, "ask mode"),
        case(
            "web_fetch",
            fetch("https://serde.docs.rs/x"),
            Full,
            "allow server:web_fetch(domain:*.docs.rs)",
        ),
        case("web_fetch", fetch("https://evildocs.rs/"), Full, "ask mode"),
        // MCP names.
        case(
            "mcp__danger__drop",
            json!({}),
            Ro,
            "deny server:mcp__danger__*",
        ),
        case(
            "mcp__github__create_issue",
            json!({}),
            Full,
            "ask server:mcp__github__create_issue",
        ),
        case(
            "mcp__github__list_issues",
            json!({}),
            Full,
            "allow server:mcp__github__*",
        ),
        case("mcp__githubx__list", json!({}), Full, "ask mode"),
        case("mcp__dangerous__x", json!({}), Ro, "allow mode"),
        // Aliases match their tool.
        with(&["deny:Bash(ls:*)"], bash("ls", "deny session:Bash(ls:*)")),
        with(
            &["allow:WebFetch(domain:example.org)"],
            case(
                "web_fetch",
                fetch("https://example.org/"),
                Full,
                "allow session:WebFetch(domain:example.org)",
            ),
        ),
        with(
            &["allow:Glob"],
            case(
                "glob_search",
                json!({"pattern": "*"}),
                Full,
                "allow session:Glob",
            ),
        ),
        // Modes.
        case("read_file", read("public/readme"), Ww, "allow mode"),
        case("write_file", path_input("file_path", "x"), Full, "ask mode"),
    ];
    let mut failures = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let session = w.session(case.session);
        let got = judged(&w, case, &session);
        if got != case.want {
            failures.push(format!(
                "#{index} {} {} (session {:?}): want \"{}\", got \"{got}\"",
                case.tool, case.input, case.session, case.want
            ));
        }
    }
    assert!(cases.len() >= 80, "{} cases", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
