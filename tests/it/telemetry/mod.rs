//! OpenTelemetry traces (DESIGN §9) against the real daemon: the span tree and its attributes
//! exported to real OTLP receivers over gRPC and HTTP/protobuf (`traces`), the other doors'
//! incoming context (`doors`), and the context handed onward to hooks and shells with traces
//! off (`propagation`). `receiver` holds the receivers.

mod doors;
mod propagation;
mod receiver;
mod traces;

use std::path::{Path, PathBuf};

/// Writes `dir/hook.sh`, a command hook appending `printf FORMAT ARGS` (shell words) to
/// `dir/seen` once per run; returns the script and the file it writes.
fn recording_hook(dir: &Path, format: &str, args: &str) -> (PathBuf, PathBuf) {
    let seen = dir.join("seen");
    let hook = dir.join("hook.sh");
    let script = format!(
        "#!/bin/sh\nprintf '{format}' {args} >> {}\n",
        seen.display()
    );
    std::fs::write(&hook, script).unwrap();
    (hook, seen)
}
