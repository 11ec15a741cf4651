//! Reading Prometheus text as the tests need it: one sample's value by name and label set
//! (labels compared as a set, whatever order the exporter writes them in), and
//! `promtool check metrics` on the whole text.

use std::io::Write;
use std::process::{Command, Stdio};

/// The value of the sample `name` whose labels are exactly `labels`, if present.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    wanted.sort();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, mut found) = match series.split_once('{') {
                Some((series_name, rest)) => (
                    series_name,
                    rest.trim_end_matches('}')
                        .split(',')
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                ),
                None => (series, Vec::new()),
            };
            found.sort();
            (series_name == name && found == wanted).then(|| value.parse().ok())?
        })
}

/// [`sample`], failing the test with the whole text when the sample is missing.
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(text, name, labels).unwrap_or_else(|| panic!("no sample {name} {labels:?} in:\n{text}"))
}

/// Runs `promtool check metrics` on `text`; `false` when promtool is not installed (the
/// test then skips this check locally; in CI (`CI` set) a missing promtool fails).
pub fn promtool_check(text: &str) -> bool {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            crate::support::skip_unless_ci(
                "promtool is not installed (`promtool check metrics`; .ci/run installs it)",
            );
            return false;
        }
        Err(err) => panic!("promtool did not start: {err}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let (sender, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    let output = answer
        .recv_timeout(crate::support::deadline::STEP)
        .expect("promtool answers within a minute")
        .unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics failed:\n{}{}\n--- the text:\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    true
}
