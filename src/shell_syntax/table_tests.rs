//! The classification table: every row asserts read-only, concurrency-safe and destructive.

use super::*;

/// read-only, concurrency-safe, not destructive
const R: Classification = Classification::READ;
/// read-only but moves the shell's cwd: not concurrency-safe
const C: Classification = Classification::CHANGES_CWD;
/// writes, not destructive
const W: Classification = Classification::WRITE;
/// destructive (or unclassifiable)
const D: Classification = Classification::DESTRUCTIVE;

const TABLE: &[(&str, Classification)] = &[
    // Plain reads.
    ("ls", R),
    ("ls -la src", R),
    ("cat Cargo.toml", R),
    ("head -n 20 src/lib.rs", R),
    ("tail -f log.txt", R),
    ("wc -l *.rs", R),
    ("grep -rn 'fn main' src", R),
    ("rg -n TODO src", R),
    ("stat README.md", R),
    ("file target/debug/toold", R),
    ("du -sh .", R),
    ("df -h", R),
    ("pwd", R),
    ("echo hello", R),
    ("printf '%s\\n' a b", R),
    ("which cargo", R),
    ("type ls", R),
    ("sort names.txt | uniq -c", R),
    ("cut -d: -f1 /etc/passwd", R),
    ("tr a-z A-Z < in.txt", R),
    ("diff a.txt b.txt", R),
    ("sleep 5", R),
    ("true", R),
    ("[ -f Cargo.toml ] && echo yes", R),
    ("[[ -d src ]]", R),
    ("jq .name package.json", R),
    ("date +%s", R),
    ("uniq in.txt", R),
    // Pipelines, lists, subshells, loops, comments, quoting.
    ("git log | head", R),
    ("git log --oneline -n 5 | head -3", R),
    ("ls && pwd", R),
    ("(ls; pwd)", R),
    ("{ ls; pwd; }", R),
    ("ls # rm -rf /", R),
    ("echo 'a; rm -rf /'", R),
    ("echo \"a;b\" | cut -d';' -f2", R),
    ("for f in *.rs; do wc -l \"$f\"; done", R),
    ("if [ -f a ]; then cat a; else echo none; fi", R),
    ("ls | while read -r line; do echo \"$line\"; done", R),
    ("! grep -q foo bar.txt", R),
    ("cat <<EOF\nhello\nEOF", R),
    ("grep x <<< 'some text'", R),
    ("cat <(ls)", R),
    ("echo $(ls)", R),
    ("echo \"today is $(date)\"", R),
    ("echo $HOME", R),
    ("set -euo pipefail; ls", R),
    // Redirections.
    ("echo hi > /dev/null", R),
    ("ls 2>&1", R),
    ("ls nothing 2>/dev/null || echo missing", R),
    ("ls &> /dev/null", R),
    ("cat < input.txt", R),
    ("cat a > b", D),
    ("echo hi >> log.txt", W),
    ("ls >& out.txt", D),
    ("ls &> out.txt", D),
    ("echo x >| f", D),
    ("cat <<EOF > notes.txt\nhello\nEOF", D),
    ("cat <<'EOF'\n$(rm -rf x)\nEOF", R),
    ("cat <<EOF\n$(rm -rf x)\nEOF", D),
    ("echo hi > $FILE", D),
    // Working directory.
    ("cd src", C),
    ("cd src && ls", C),
    ("pushd src && ls && popd", C),
    // Substitutions hiding writes.
    ("echo $(rm -rf x)", D),
    ("echo `rm -rf x`", D),
    ("cat <(rm x)", D),
    ("ls $(echo -la)", R),
    ("x=$(ls)", W),
    // Assignments and shell state.
    ("FOO=1 ls", W),
    ("PATH=/tmp ls", D),
    ("LD_PRELOAD=evil.so ls", D),
    ("export FOO=1", W),
    ("export PATH=/tmp:$PATH; ls", D),
    ("unset FOO", W),
    ("ls() { rm -rf /; }; ls", D),
    ("eval 'ls'", W),
    ("eval 'rm -rf x'", D),
    ("source env.sh", D),
    (". ./env.sh", D),
    ("exec ls", W),
    ("trap 'rm -f tmp' EXIT", D),
    // Sequences where one part writes.
    ("ls; rm x", D),
    ("ls && rm -rf /", D),
    ("ls || mkdir out", W),
    ("git status; git commit -m wip", W),
    // find.
    ("find . -name '*.rs'", R),
    ("find . -type f -newer Cargo.toml", R),
    ("find . -delete", D),
    ("find . -name '*.tmp' -delete", D),
    ("find . -de\\lete", D),
    ("find . \"-delete\"", D),
    ("find . -exec rm {} \\;", D),
    ("find . -exec grep -l foo {} +", W),
    ("find . -fprint out.txt", D),
    ("find . -name *.rs", D),
    ("find . $ARGS", D),
    // xargs and other wrappers.
    ("ls | xargs rm", D),
    ("ls | xargs grep foo", R),
    ("ls | xargs -n 1 wc -l", R),
    ("find . -name '*.o' | xargs -I{} rm {}", D),
    ("ls | xargs", R),
    ("timeout 5 ls", R),
    ("timeout 5 rm -rf x", D),
    ("nice -n 5 grep foo bar", R),
    ("time ls", R),
    ("command -v cargo", R),
    ("env", R),
    ("env FOO=1 ls", W),
    ("env PATH=/tmp ls", D),
    ("sudo ls", W),
    ("sudo rm -rf /", D),
    ("sudo -u root cat /etc/shadow", W),
    ("bash -c 'ls'", W),
    ("bash -c 'rm x'", D),
    ("sh -c \"$CMD\"", D),
    ("bash script.sh", D),
    // Options that write.
    ("sort -o out.txt in.txt", D),
    ("sort --output=out.txt in.txt", D),
    ("sort --out=out.txt in.txt", D),
    ("uniq in.txt out.txt", D),
    ("tree -o out.txt", D),
    ("date -s '2020-01-01'", D),
    ("printf -v PATH /tmp", D),
    ("rg --pre ./evil foo", D),
    ("fd -x rm", D),
    ("tee out.txt", D),
    ("tee -a out.txt", W),
    ("tee /dev/null", R),
    // sed and awk.
    ("sed -n '1,20p' file.txt", R),
    ("sed 's/foo/bar/g' file.txt", R),
    ("sed -e 's|a|b|' -e '/^#/d' file.txt", R),
    ("sed -i 's/foo/bar/' file.txt", D),
    ("sed --in-place=.bak 's/a/b/' f", D),
    ("sed 's/a/b/w out.txt' f", D),
    ("sed 's/a/b/e' f", D),
    ("sed -n '/start/,/end/p' f", R),
    ("sed '1d;$d' f", R),
    ("awk '{print $1}' file.txt", R),
    ("awk -F: '{ print $1 }' /etc/passwd", R),
    ("awk '{ print > \"out\" }' f", D),
    ("awk 'BEGIN { system(\"rm x\") }'", D),
    // Files.
    ("rm x", D),
    ("rm -rf build", D),
    ("rmdir empty", D),
    ("mv a b", D),
    ("mv -n a b", W),
    ("cp a b", D),
    ("cp -n a b", W),
    ("mkdir -p out", W),
    ("touch x", W),
    ("ln -s a b", W),
    ("ln -sf a b", D),
    ("dd if=/dev/zero of=disk.img bs=1M count=1", D),
    ("truncate -s 0 log.txt", D),
    ("shred -u secret", D),
    ("chmod +x run.sh", W),
    ("chmod -R 777 .", D),
    ("chown -R me .", D),
    ("kill 1234", D),
    // git.
    ("git status", R),
    ("git diff HEAD~1", R),
    ("git show HEAD:README.md", R),
    ("git rev-parse --abbrev-ref HEAD", R),
    ("git branch", R),
    ("git branch --list 'feat/*'", R),
    ("git branch -a -v", R),
    ("git branch new-feature", W),
    ("git branch -d old", W),
    ("git branch -D old", D),
    ("git tag", R),
    ("git tag -l 'v1*'", R),
    ("git tag v1.0", W),
    ("git -C sub log --oneline", R),
    ("git --no-pager diff --stat", R),
    ("git diff --output=patch.diff", D),
    ("git -c core.pager=evil log", D),
    ("git config user.name", R),
    ("git config user.name Me", W),
    ("git stash list", R),
    ("git stash", W),
    ("git stash drop", D),
    ("git add -A && git commit -m 'msg'", W),
    ("git push origin main", W),
    ("git push --force origin main", D),
    ("git push -f", D),
    ("git push origin +main", D),
    ("git reset --hard HEAD~1", D),
    ("git reset HEAD file", W),
    ("git clean -fdx", D),
    ("git clean -n", R),
    ("git checkout -- .", D),
    ("git checkout -b feature", W),
    ("git checkout main", D),
    ("git restore file.rs", D),
    ("git restore --staged file.rs", W),
    ("git log $REV", D),
    ("git show $(git rev-parse HEAD)", D),
    ("ls | xargs -I{} grep foo {}", R),
    ("for HOME in /tmp; do git log; done", W),
    ("for PATH in /tmp; do ls; done", D),
    ("read -r PATH < f", D),
    ("ls {a,b}", R),
    ("find . {-delete,-print}", D),
    ("git frobnicate", D),
    ("git --version", R),
    // Unknown or not literal.
    ("cargo build", D),
    ("python3 script.py", D),
    ("$EDITOR file", D),
    ("./ls", D),
    ("/bin/ls", D),
    ("curl -o out https://example.com", D),
    ("coproc ls", D),
    // Parse errors.
    ("echo 'unterminated", D),
    ("ls (", D),
    ("if then fi", D),
];

#[test]
fn the_classification_table_holds() {
    assert!(TABLE.len() >= 80, "the table has {} rows", TABLE.len());
    let mut failures = Vec::new();
    for (command, expected) in TABLE {
        let got = classify(command).expect("the classifier runs");
        if got != *expected {
            failures.push(format!("{command:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_verdict_does_not_depend_on_the_cache() {
    // Same text classified twice, with other commands in between, gives the same answer.
    let first = classify("git status").unwrap();
    for (command, _) in TABLE.iter().take(CACHE_ENTRIES + 2) {
        classify(command).unwrap();
    }
    assert_eq!(classify("git status").unwrap(), first);
    assert_eq!(classify("rm -rf /").unwrap(), D);
}

#[test]
fn deep_nesting_fails_closed() {
    // Within the parse budget, past the walker's depth limit.
    let deep = format!("{}ls{}", "$(echo ".repeat(400), ")".repeat(400));
    assert_eq!(classify(&deep), Ok(D));
    let nested_shells = "bash -c \"bash -c 'bash -c \\\"eval ls\\\"'\"";
    assert!(!classify(nested_shells).unwrap().read_only);
}

/// A pipeline of `stages` `cat`s.
fn pipeline(stages: usize) -> String {
    format!("{}cat", "cat | ".repeat(stages - 1))
}

#[test]
fn a_parse_over_budget_is_an_error_and_the_parser_recovers() {
    // The budget counts parser work and `|` characters, not time, so these outcomes are the
    // same on every machine and under any load. Long pipelines are the grammar's slow case.
    let over_budget = [
        pipeline(5_000),
        // Fast to parse, but more `|` than a pipeline may have stages.
        format!("echo '{}'", "a | b ".repeat(2_000)),
        // No pipe at all: too much work.
        "ls; ".repeat(20_000),
        // Nested scripts share the line's budget: each half alone is within it.
        format!("{}bash -c '{}'", "ls; ".repeat(8_000), "ls; ".repeat(8_000)),
    ];
    for _ in 0..2 {
        for command in &over_budget {
            let verdict = analyze(command);
            let refused = matches!(&verdict, Err(message) if message.contains("too complex to classify"))
                // A nested script over budget fails closed inside its parent.
                || matches!(&verdict, Ok(analysis) if analysis.classification == D);
            assert!(refused, "{}…: {verdict:?}", &command[..40]);
        }
        assert_eq!(classify("git status"), Ok(R));
        assert_eq!(classify("rm -rf x"), Ok(D));
    }
    // Long ordinary command lines stay inside it.
    assert_eq!(classify(&pipeline(1_000)), Ok(R));
    assert_eq!(classify(&"ls; ".repeat(5_000)), Ok(R));
    let many_words = format!("ls {}", "src/lib.rs ".repeat(9_000));
    assert_eq!(classify(&many_words), Ok(R));
}

#[test]
fn path_like_words_are_reported() {
    use PathWord::{Anywhere as A, Literal as L};
    let cases: &[(&str, &[PathWord])] = &[
        ("cat src/lib.rs", &[]),
        ("cat /etc/passwd | grep root", &[L("/etc/passwd".into())]),
        ("ls ../..", &[L("../..".into())]),
        ("head ~/.ssh/id_rsa", &[A("~/.ssh/id_rsa".into())]),
        ("cd /etc && cat passwd", &[L("/etc".into())]),
        ("cd sub", &[L("sub".into())]),
        ("cd -P -- sub", &[L("sub".into())]),
        ("cd", &[A("~".into())]),
        ("cd -", &[A("-".into())]),
        ("pushd +1", &[]),
        ("cat < in.txt > /dev/null 2>&1", &[L("in.txt".into())]),
        ("ls 2> ../err.txt", &[L("../err.txt".into())]),
        (
            "grep -f/etc/x --file=../y a=/z",
            &[L("/etc/x".into()), L("../y".into()), L("/z".into())],
        ),
        ("cat $HOME/x $f ${g}", &[A("$HOME/x".into())]),
        ("cat /etc/*.conf", &[L("/etc".into())]),
        ("cat ../*/x", &[A("../*/x".into())]),
        ("for f in /etc/*; do :; done", &[L("/etc".into())]),
        ("echo $(cat /x) /x", &[L("/x".into())]),
    ];
    let mut failures = Vec::new();
    for (command, expected) in cases {
        let got = analyze(command).expect("the classifier runs").paths;
        if got != *expected {
            failures.push(format!("{command:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Past the limit the rest is one word that may lead anywhere.
    let many: Vec<String> = (0..MAX_PATH_WORDS + 5).map(|n| format!("/w/{n}")).collect();
    let paths = analyze(&format!("ls {}", many.join(" "))).unwrap().paths;
    assert_eq!(paths.len(), MAX_PATH_WORDS + 1);
    assert!(
        matches!(paths.last(), Some(PathWord::Anywhere(_))),
        "{paths:?}"
    );
}

#[test]
fn sed_scripts_are_read_carefully() {
    let cases = [
        ("p", true),
        ("10q", true),
        ("s/a/b/", true),
        ("s/a;b/c/g", true),
        ("s#/#|#g", true),
        ("y/abc/xyz/", true),
        ("/x/I,+3p", true),
        ("1~2d", true),
        ("w out", false),
        ("s/a/b/w out", false),
        ("1e date", false),
        ("s/a/b/ge", false),
        ("{p;W out\n}", false),
    ];
    for (script, read_only) in cases {
        assert_eq!(
            text::sed_script_is_read_only(script),
            read_only,
            "{script:?}"
        );
    }
}
