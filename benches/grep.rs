//! `grep_search` over a generated 10 000-file tree, against `rg` on the same tree.
//!
//! The tool runs in-process (as the daemon runs it, through `Tool::execute` on a multi-thread
//! runtime); `rg` is spawned as a process with the same pattern and its output read from a
//! pipe, so its figure includes process start-up, as a user of `rg` would pay it. Runs are
//! interleaved (tool, rg, tool, rg, ...) so that load from elsewhere on the machine hits both
//! alike, and the median of each is reported with the ratio against the budget (1.5x rg).
//! Run with `cargo bench --bench grep`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{Tool, ToolContext};
use toold::tools::GrepSearch;

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const ROUNDS: usize = 15;
const BUDGET: f64 = 1.5;
const PATTERN: &str = r"needle_[0-9]+\(";

/// A deterministic xorshift generator, so every run searches the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// 10 000 source-like files of 1-6 KiB in 100 directories, about one in eight containing the
/// pattern, in a git repository with a `.gitignore` (so ignore rules are evaluated).
fn generate(root: &Path) {
    const WORDS: [&str; 12] = [
        "let", "value", "return", "fn", "match", "struct", "impl", "self", "config", "result",
        "error", "buffer",
    ];
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n").unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for d in 0..DIRS {
        let dir = root.join(format!("module_{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let lines = 30 + (rng.next() % 120) as usize;
            let mut text = String::with_capacity(lines * 40);
            for line in 0..lines {
                let words = 3 + (rng.next() % 6) as usize;
                text.push_str("    ");
                for _ in 0..words {
                    text.push_str(WORDS[(rng.next() % WORDS.len() as u64) as usize]);
                    text.push(' ');
                }
                if line == lines / 2 && rng.next().is_multiple_of(8) {
                    text.push_str(&format!("needle_{}(x);", rng.next() % 1000));
                }
                text.push('\n');
            }
            std::fs::write(dir.join(format!("file_{f:03}.rs")), text).unwrap();
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ripgrep() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("rg"))
        .find(|candidate| candidate.is_file())
}

/// Runs `rg` with its output on a pipe; the time and the number of output lines.
fn time_rg(rg: &Path, root: &Path, flags: &[&str]) -> (Duration, usize) {
    let start = Instant::now();
    let output = Command::new(rg)
        .args(flags)
        .args(["-e", PATTERN, "--"])
        .arg(root)
        .current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .stdout(Stdio::piped())
        .output()
        .expect("rg runs");
    let elapsed = start.elapsed();
    (
        elapsed,
        output.stdout.iter().filter(|&&b| b == b'\n').count(),
    )
}

/// Runs the tool in-process; the time and the number of output lines.
async fn time_tool(
    tool: &GrepSearch,
    session: &Arc<SessionState>,
    input: &Value,
) -> (Duration, usize) {
    let ctx = ToolContext::detached(session.clone());
    let start = Instant::now();
    let output = tool
        .execute(input.clone(), &ctx)
        .await
        .expect("grep_search runs");
    let elapsed = start.elapsed();
    (
        elapsed,
        output.metadata["num_lines"].as_u64().unwrap_or(0) as usize,
    )
}

fn main() {
    let Some(rg) = ripgrep() else {
        eprintln!("rg is not installed; the grep benchmark compares against it");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    generate(&root);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = Arc::new(SessionState::new(SessionConfig::new("bench", &root)));
    let tool = GrepSearch::new().expect("grep_search builds");
    println!(
        "grep benchmark: {} files, pattern {PATTERN:?}, {ROUNDS} interleaved rounds, medians",
        DIRS * FILES_PER_DIR
    );
    let modes: [(&str, Value, &[&str]); 3] = [
        (
            "files_with_matches",
            json!({"pattern": PATTERN, "head_limit": 0}),
            &["--files-with-matches"],
        ),
        (
            "content -n",
            json!({"pattern": PATTERN, "output_mode": "content", "head_limit": 0}),
            &["-n", "--no-heading", "--with-filename"],
        ),
        (
            "count",
            json!({"pattern": PATTERN, "output_mode": "count", "head_limit": 0}),
            &["--count"],
        ),
    ];
    for (name, input, flags) in modes {
        // Warm the page cache and check that both see the same results.
        let (_, tool_lines) = runtime.block_on(time_tool(&tool, &session, &input));
        let (_, rg_lines) = time_rg(&rg, &root, flags);
        assert_eq!(
            tool_lines, rg_lines,
            "{name}: the tool and rg disagree on the output size"
        );
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            ours.push(runtime.block_on(time_tool(&tool, &session, &input)).0);
            theirs.push(time_rg(&rg, &root, flags).0);
        }
        let (ours, theirs) = (median(ours), median(theirs));
        let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
        let verdict = if ratio <= BUDGET { "within" } else { "OVER" };
        println!(
            "{name:<20} grep_search {:>8.2} ms   rg {:>8.2} ms   ratio {ratio:.2} ({verdict} the {BUDGET}x budget; {tool_lines} output lines)",
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
        );
    }
}
