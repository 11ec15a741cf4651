//! The workspace in and out, against floors measured in the same run (`cargo bench --bench
//! workspace`; `TOOLD_BENCH_BINARY` picks another build):
//!
//! - a 1 GiB tar uploaded (`POST …/archive`) and downloaded (`GET …/archive`) with `curl`,
//!   beside the same `curl` posting the same file to a plain HTTP sink and fetching it from
//!   `python3 -m http.server` (the floor: loopback HTTP with nothing behind it);
//! - a fork (`POST …/fork {"count": 1}`) of a 10 MiB workspace and of a 1 GiB one in 50,000
//!   files, beside `cp -a` of the same tree, each fork the first and the second of its session.
//!
//! Prints one table; numbers, not asserts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const MIB: u64 = 1 << 20;

struct Daemon {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon() -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let binary = std::env::var_os("TOOLD_BENCH_BINARY")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toold").into());
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let base = line
        .trim()
        .strip_prefix("toold listening on ")
        .unwrap()
        .to_owned();
    Daemon {
        child,
        base,
        _dir: dir,
    }
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--fail-with-body"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

fn session(daemon: &Daemon) -> String {
    let body = curl(&[
        "-X",
        "POST",
        "-d",
        "{}",
        "-H",
        "content-type: application/json",
        &format!("{}/v1/sessions", daemon.base),
    ]);
    json(&body)["id"].as_str().unwrap().to_owned()
}

/// `files` files making `bytes` in all, under `dir` (100 per directory), content varied.
fn make_tree(dir: &Path, files: u64, bytes: u64) {
    let size = (bytes / files) as usize;
    let mut block = vec![0u8; size];
    for i in 0..files {
        let sub = dir.join(format!("d{}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        for (j, b) in block.iter_mut().enumerate().step_by(512) {
            *b = (i as usize ^ j) as u8;
        }
        std::fs::write(sub.join(format!("f{i}")), &block).unwrap();
    }
}

fn tar_of(dir: &Path, out: &Path) {
    let status = Command::new("tar")
        .arg("cf")
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .unwrap();
    assert!(status.success());
}

/// A plain HTTP sink: reads each request's Content-Length bytes, answers 200.
fn sink() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut length = 0u64;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if lower.starts_with("expect:") {
                    reader
                        .get_mut()
                        .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                        .unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            std::io::copy(&mut (&mut reader).take(length), &mut std::io::sink()).unwrap();
            let _ = reader
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    format!("http://{address}/")
}

fn timed(what: impl FnOnce()) -> f64 {
    let started = Instant::now();
    what();
    started.elapsed().as_secs_f64()
}

fn throughput(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / MIB as f64 / seconds
}

fn transfers(scratch: &Path) {
    let tree = scratch.join("gib");
    make_tree(&tree, 16, 1024 * MIB);
    let archive = scratch.join("gib.tar");
    tar_of(&tree, &archive);
    let bytes = std::fs::metadata(&archive).unwrap().len();
    let upload = archive.display().to_string();
    let floor_up = timed(|| {
        curl(&["-X", "POST", "-H", "Expect:", "-T", &upload, &sink()]);
    });
    let mut server = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", "0"])
        .current_dir(scratch)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split("port ")
        .nth(1)
        .and_then(|p| p.split_whitespace().next())
        .unwrap()
        .to_owned();
    let floor_down = timed(|| {
        curl(&[
            "-o",
            "/dev/null",
            &format!("http://127.0.0.1:{port}/gib.tar"),
        ]);
    });
    let _ = server.kill();
    let _ = server.wait();
    let daemon = daemon();
    let id = session(&daemon);
    let up = timed(|| {
        curl(&[
            "-X",
            "POST",
            "-H",
            "Expect:",
            "-T",
            &upload,
            &format!("{}/v1/sessions/{id}/archive", daemon.base),
        ]);
    });
    let down = timed(|| {
        curl(&[
            "-o",
            "/dev/null",
            &format!("{}/v1/sessions/{id}/archive", daemon.base),
        ]);
    });
    println!("1 GiB archive ({bytes} bytes)   toold MiB/s   floor MiB/s   ratio");
    let row = |what: &str, toold: f64, floor: f64| {
        let (t, f) = (throughput(bytes, toold), throughput(bytes, floor));
        println!("  {what:<26} {t:>11.0} {f:>13.0} {:>7.2}", t / f);
    };
    row("upload (POST archive)", up, floor_up);
    row("download (GET archive)", down, floor_down);
}

fn fork_case(scratch: &Path, name: &str, files: u64, bytes: u64) {
    let tree = scratch.join(name);
    make_tree(&tree, files, bytes);
    let archive = scratch.join(format!("{name}.tar"));
    tar_of(&tree, &archive);
    let cp = timed(|| {
        let status = Command::new("cp")
            .arg("-a")
            .arg(&tree)
            .arg(scratch.join(format!("{name}-copy")))
            .status()
            .unwrap();
        assert!(status.success());
    });
    let daemon = daemon();
    let id = session(&daemon);
    curl(&[
        "-X",
        "POST",
        "-H",
        "Expect:",
        "-T",
        &archive.display().to_string(),
        &format!("{}/v1/sessions/{id}/archive", daemon.base),
    ]);
    let fork = |session: &str| {
        let mut answer = String::new();
        let seconds = timed(|| {
            answer = curl(&[
                "-X",
                "POST",
                "-H",
                "content-type: application/json",
                "-d",
                "{\"count\": 1}",
                &format!("{}/v1/sessions/{session}/fork", daemon.base),
            ]);
        });
        (seconds, json(&answer))
    };
    let (first, answer) = fork(&id);
    let (second, _) = fork(&id);
    let child = answer["sessions"][0]["id"].as_str().unwrap().to_owned();
    let (of_fork, _) = fork(&child);
    println!(
        "  {name:<10} {files:>6} files {:>5} MiB   fork {:>7.1} ms (again {:>6.1} ms, of a fork {:>6.1} ms, copy \"{}\")   cp -a {:>8.1} ms   cp/fork {:>6.0}x",
        bytes / MIB,
        first * 1e3,
        second * 1e3,
        of_fork * 1e3,
        answer["copy"].as_str().unwrap_or("?"),
        cp * 1e3,
        cp / first
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let scratch = tempfile::tempdir_in(
        std::env::var_os("TOOLD_BENCH_SCRATCH").map_or_else(std::env::temp_dir, PathBuf::from),
    )
    .unwrap();
    transfers(scratch.path());
    let _ = std::fs::remove_dir_all(scratch.path().join("gib"));
    println!("fork (snapshot + 1 session) beside cp -a of the same tree");
    fork_case(scratch.path(), "10mib", 100, 10 * MIB);
    fork_case(scratch.path(), "1gib", 50_000, 1024 * MIB);
}
