//! Waits with a deadline: a test whose feature is broken fails, naming what it waited for,
//! instead of hanging the suite. Every wait in the integration tests goes through one of these
//! (or a `tokio::time::timeout` of its own): a child process's exit or output, a line from a
//! child's stdout, an async step (an SSE frame, a channel, a request).

use std::future::Future;
use std::io::{BufRead, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a test waits for one step when it has no reason to choose another: long enough
/// for a loaded 2-core machine, short enough that a hung feature costs a minute.
pub const STEP: Duration = Duration::from_secs(60);

/// `future`'s output, or a panic naming `what` after `limit`.
#[track_caller]
pub fn within<F: Future>(
    limit: Duration,
    what: &str,
    future: F,
) -> impl Future<Output = F::Output> {
    let caller = std::panic::Location::caller();
    let what = what.to_owned();
    async move {
        match tokio::time::timeout(limit, future).await {
            Ok(output) => output,
            Err(_) => panic!("timed out after {limit:?} waiting for {what} ({caller})"),
        }
    }
}

/// Waits for `child` to exit; after `limit` it is killed and the test fails naming `what`.
#[track_caller]
pub fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait on a child") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out after {limit:?} waiting for {what} to exit (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`Command::output`] with a deadline: after `limit` the child is killed and the test fails
/// naming `what`, with what it printed so far. A child that cannot start is the `Err`.
#[track_caller]
pub fn output_within(
    command: &mut Command,
    limit: Duration,
    what: &str,
) -> std::io::Result<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            // The pipes close with the child (or with its last grandchild, hence the limit).
            let printed = stdout
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default();
            let errors = stderr
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default();
            panic!(
                "timed out after {limit:?} waiting for {what} (killed); stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&printed),
                String::from_utf8_lossy(&errors)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A grandchild that kept a pipe open must not hold the test either.
    let collect = |pipe: mpsc::Receiver<Vec<u8>>, name: &str| {
        pipe.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| {
                panic!("{what} exited but its {name} stayed open (a child left running?)")
            })
    };
    Ok(Output {
        status,
        stdout: collect(stdout, "stdout"),
        stderr: collect(stderr, "stderr"),
    })
}

/// [`output_within`] as a method, for a command built in one chain:
/// `Command::new(..).args(..).output_within(STEP, "what")`.
pub trait OutputWithin {
    fn output_within(&mut self, limit: Duration, what: &str) -> std::io::Result<Output>;
}

impl OutputWithin for Command {
    #[track_caller]
    fn output_within(&mut self, limit: Duration, what: &str) -> std::io::Result<Output> {
        output_within(self, limit, what)
    }
}

/// Reads `pipe` to its end on a thread of its own; the bytes arrive on the channel.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = sender.send(bytes);
    });
    receiver
}

/// The first line `reader` gives (without its newline; empty at end of input), or `None` when
/// none came within `limit`. The reader stays with the thread reading it.
pub fn first_line_within(
    reader: impl BufRead + Send + 'static,
    limit: Duration,
) -> Option<std::io::Result<String>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = reader;
        let mut line = String::new();
        let read = reader.read_line(&mut line).map(|_| line);
        let _ = sender.send(read);
    });
    receiver.recv_timeout(limit).ok()
}

/// A line reader on its own thread: [`LineReader::next_within`] waits for the next line with
/// a deadline (a child's stdout read line by line).
pub struct LineReader {
    lines: mpsc::Receiver<std::io::Result<String>>,
}

impl LineReader {
    pub fn new(reader: impl BufRead + Send + 'static) -> LineReader {
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in reader.lines() {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        LineReader { lines }
    }

    /// The next line; `None` at the end of input. Fails the test naming `what` after `limit`.
    #[track_caller]
    pub fn next_within(&self, limit: Duration, what: &str) -> Option<String> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => Some(line.expect("a line of text")),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("timed out after {limit:?} waiting for {what}")
            }
        }
    }
}
