//! Unit tests of the engine's stopping rules: the output cap and cancellation act within a file,
//! not only between files.

use ignore::overrides::Override;
use ignore::types::TypesBuilder;

use super::*;

fn plan(pattern: &str) -> SearchPlan {
    SearchPlan {
        matcher: RegexMatcher::new(pattern).unwrap(),
        types: TypesBuilder::new().build().unwrap(),
        overrides: Override::empty(),
        mode: OutputMode::Content,
        before_context: 0,
        after_context: 0,
        line_numbers: true,
        multiline: false,
    }
}

/// `lines` numbered lines of text.
fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| format!("line {i} of a generated file\n").into_bytes())
        .collect()
}

/// The longest line of `output`, its newline included.
fn longest_line(output: &[u8]) -> usize {
    output
        .split(|&b| b == b'\n')
        .map(|line| line.len() + 1)
        .max()
        .unwrap_or(0)
}

#[test]
fn the_output_cap_stops_a_large_file_midway() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join("large.txt");
    let contents = text(200_000);
    std::fs::write(&path, &contents).unwrap();
    let cap = 64 * 1024;
    let plan = plan(".");
    for root in [
        SearchRoot::by_name(path.clone(), "large.txt".into(), dir.path()).unwrap(),
        SearchRoot::by_name(path.parent().unwrap().into(), ".".into(), dir.path()).unwrap(),
    ] {
        let result = run_capped(&plan, &root, &CancellationToken::new(), cap);
        assert_eq!(result.stopped, Some(Stopped::OutputCap));
        let collected = result.output.len();
        // Past the cap (that is what stopped it), but by at most the line that crossed it.
        assert!(collected > cap, "{collected}");
        assert!(
            collected <= cap + longest_line(&result.output),
            "{collected}"
        );
        assert!(collected < contents.len());
        assert!(
            result
                .output
                .starts_with(format!("{}:1:line 0 ", path.display()).as_bytes())
        );
    }
}

#[test]
fn cancellation_stops_a_file_midway() {
    let plan = plan("line");
    let cancel = CancellationToken::new();
    let collector = Collector::new(cancel.clone(), MAX_COLLECTED_BYTES);
    let path = Path::new("/ws/a.txt");
    let mut sink = FileSink::new(&plan, path, &collector);
    let mut searcher = searcher(&plan, BinaryDetection::quit(b'\0'));
    cancel.cancel();
    searcher
        .search_slice(&plan.matcher, &text(1000), &mut sink)
        .unwrap();
    // The first line is written before the sink looks; nothing after it.
    assert_eq!(
        String::from_utf8_lossy(&sink.out),
        "/ws/a.txt:1:line 0 of a generated file\n"
    );
    assert_eq!(collector.finish(&plan).stopped, Some(Stopped::Cancelled));
}

#[test]
fn the_budget_is_shared_and_counted_as_written() {
    let collector = Collector::new(CancellationToken::new(), 10);
    assert!(!collector.spend(6));
    assert!(!collector.spend(4));
    assert!(collector.spend(1));
    assert!(collector.should_stop());
    assert_eq!(collector.bytes.load(Ordering::Relaxed), 11);
}
