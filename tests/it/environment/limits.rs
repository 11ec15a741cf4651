//! An environment's limits through the real daemon (DESIGN §12): a 600 MiB allocation under
//! `memory_mb = 64` and a fork bomb under `pids = 64` end as `resource_exhausted` naming the
//! limit, a 100 MiB write under `disk_mb = 20` fails inside with ENOSPC and the host loses at
//! most about 20 MiB; meanwhile another session's `echo` answers within a second; a request
//! over `max_limits` is refused naming the limit; a restarted daemon mounts a session's disk
//! again, its writes kept and its bound holding.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;

async fn session(toold: &Toold, image: &str, limits: Value) -> String {
    toold
        .session_with(&json!({
            "environment": {"image": image, "limits": limits},
            "permission_mode": "workspace_write",
        }))
        .await
}

async fn bash(toold: &Toold, session: &str, command: &str) -> Value {
    toold
        .call_one(
            session,
            "bash",
            json!({"command": command, "timeout": 60000}),
        )
        .await
}

fn text(result: &Value) -> &str {
    result["output"].as_str().unwrap_or_default()
}

/// Runs `busy` while `other` answers `echo hi` again and again; `busy`'s result and the
/// slowest echo's latency (each must answer `hi`).
async fn while_echoing(
    toold: &Toold,
    other: &str,
    busy: impl std::future::Future<Output = Value>,
) -> (Value, Duration, usize) {
    let mut busy = std::pin::pin!(busy);
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    loop {
        let started = Instant::now();
        tokio::select! {
            result = &mut busy => return (result, slowest, answered),
            echo = bash(toold, other, "echo hi") => {
                assert_eq!(text(&echo), "hi\n", "the other session: {echo}");
                slowest = slowest.max(started.elapsed());
                answered += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Bytes free where the daemon keeps its data.
fn free_bytes(dir: &std::path::Path) -> u64 {
    let path = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: statvfs fills the struct it is given from a NUL-terminated path.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut stat) }, 0);
    stat.f_bavail * stat.f_frsize
}

#[tokio::test]
async fn memory_and_process_limits_stop_the_call_and_name_the_limit() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let hog = session(&toold, &image, json!({"memory_mb": 64, "pids": 64})).await;
    let other = session(&toold, &image, json!({})).await;
    let warm = bash(&toold, &other, "echo hi").await;
    assert_eq!(text(&warm), "hi\n", "{warm}");

    let allocate = bash(
        &toold,
        &hog,
        "dd if=/dev/zero of=/dev/null bs=600M count=1 && echo allocated",
    );
    let (allocated, slowest, answered) = while_echoing(&toold, &other, allocate).await;
    assert_eq!(allocated["is_error"], true, "{allocated}");
    assert_eq!(allocated["error_kind"], "resource_exhausted", "{allocated}");
    assert!(
        text(&allocated).contains("memory_mb = 64 reached"),
        "{allocated}"
    );
    assert!(!text(&allocated).contains("allocated\n"), "{allocated}");
    assert_eq!(allocated["metadata"]["limits"], "cgroup v1", "{allocated}");
    assert!(
        answered >= 1 && slowest < Duration::from_secs(1),
        "{slowest:?}"
    );

    let bomb = bash(&toold, &hog, "bomb() { bomb | bomb & }; bomb; sleep 30");
    let started = Instant::now();
    let (bombed, slowest, answered) = while_echoing(&toold, &other, bomb).await;
    assert_eq!(bombed["error_kind"], "resource_exhausted", "{bombed}");
    assert!(text(&bombed).contains("pids = 64 reached"), "{bombed}");
    // Stopped when it met the limit, not at its end or its timeout.
    assert!(started.elapsed() < Duration::from_secs(20), "{bombed}");
    assert!(
        answered >= 1 && slowest < Duration::from_secs(1),
        "{slowest:?}"
    );

    // The session goes on, and a plain failure is no limit.
    assert_eq!(text(&bash(&toold, &hog, "echo after").await), "after\n");
    let failed = bash(&toold, &hog, "exit 3").await;
    assert_eq!(failed["error_kind"], "execution", "{failed}");

    let metrics = toold.get_text("/metrics").await.1;
    let kills = |limit: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("toold_limit_kills_total{{limit=\"{limit}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(kills("memory_mb") >= 1.0, "{metrics}");
    assert!(kills("pids") >= 1.0, "{metrics}");
}

#[tokio::test]
async fn cpus_is_a_quota_on_the_sessions_cgroup() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(&toold, &image, json!({"cpus": 0.5, "memory_mb": 100})).await;
    let ran = bash(&toold, &id, "echo ran").await;
    assert_eq!(text(&ran), "ran\n", "{ran}");
    // The daemon's own directory in each v1 hierarchy, from /proc/<pid>/cgroup.
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", toold.pid())).unwrap();
    let prefix = format!("toold-{}-{id}-", toold.pid());
    let find = |hierarchy: &str| {
        let path = own
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                controllers
                    .split(',')
                    .any(|c| c == hierarchy)
                    .then_some(path)
            })
            .unwrap();
        let parent = format!("/sys/fs/cgroup/{hierarchy}{path}");
        std::fs::read_dir(&parent)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .unwrap_or_else(|| panic!("no cgroup {prefix}… in {parent}"))
    };
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap();
    let cpu = find("cpu");
    assert_eq!(read(cpu.join("cpu.cfs_quota_us")).trim(), "50000");
    assert_eq!(read(cpu.join("cpu.cfs_period_us")).trim(), "100000");
    let memory = find("memory");
    assert_eq!(
        read(memory.join("memory.limit_in_bytes")).trim(),
        (100u64 << 20).to_string()
    );
    assert_eq!(read(find("pids").join("pids.max")).trim(), "512");
}

#[tokio::test]
async fn writes_past_disk_mb_fail_inside_with_enospc() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let small = session(&toold, &image, json!({"disk_mb": 20})).await;
    let other = session(&toold, &image, json!({})).await;
    bash(&toold, &other, "echo hi").await;
    let free_before = free_bytes(toold.dir.path());

    let write = bash(
        &toold,
        &small,
        "dd if=/dev/zero of=/workspace/big bs=1M count=100",
    );
    let (written, slowest, _) = while_echoing(&toold, &other, write).await;
    assert_eq!(written["is_error"], true, "{written}");
    assert!(
        text(&written).contains("No space left on device"),
        "{written}"
    );
    // What the session's writes take on the host: the blocks of its disk image (precise),
    // and the data directory's free space (other tests write beside it, so loosely: an
    // unbounded write would have taken all 100 MiB).
    // SAFETY: sync(2) takes nothing.
    unsafe { libc::sync() };
    unsafe { libc::sync() };
    let image = toold
        .dir
        .path()
        .join(format!("data/environments/{small}/disk.img"));
    use std::os::unix::fs::MetadataExt;
    let taken = std::fs::metadata(&image).unwrap().blocks() * 512;
    assert!(
        (10 << 20..=21 << 20).contains(&taken),
        "the disk image takes {taken} bytes"
    );
    let free_after = free_bytes(toold.dir.path());
    let dropped = free_before.saturating_sub(free_after);
    assert!(dropped <= 60 << 20, "the host lost {dropped} bytes");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    // What fitted is there, and the file tools see the same bound.
    let size = bash(&toold, &small, "stat -c %s /workspace/big").await;
    let size: u64 = text(&size).trim().parse().unwrap();
    assert!((10 << 20..=20 << 20).contains(&size), "{size}");
    let other_big = bash(
        &toold,
        &other,
        "dd if=/dev/zero of=/workspace/big bs=1M count=30 2>&1; stat -c %s /workspace/big",
    )
    .await;
    assert!(text(&other_big).contains("31457280"), "{other_big}");
    let through_tool = toold
        .call_one(
            &small,
            "write_file",
            json!({"file_path": "/workspace/more.txt", "content": "x".repeat(8 << 20)}),
        )
        .await;
    assert_eq!(through_tool["is_error"], true, "{through_tool}");

    // Closing the session takes its disk away.
    let closed = toold.delete(&format!("/v1/sessions/{small}")).await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.body);
    let images: Vec<_> = walk(toold.dir.path())
        .into_iter()
        .filter(|p| p.ends_with(format!("{small}/disk.img")))
        .collect();
    assert!(images.is_empty(), "{images:?}");
    // The other session (default `disk_mb`) has its own.
    assert!(
        walk(toold.dir.path())
            .iter()
            .any(|p| p.ends_with(format!("{other}/disk.img")))
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => found.extend(walk(&path)),
            _ => found.push(path),
        }
    }
    found
}

#[tokio::test]
async fn a_request_over_max_limits_is_refused_naming_the_limit() {
    let Some((registry, toold)) = fixture(
        "[environments]\ndefault_limits = { memory_mb = 128, cpus = 1.0, pids = 64, disk_mb = 32 }\n\
         max_limits = { memory_mb = 256, cpus = 1.0, pids = 128, disk_mb = 64 }\n",
    ) else {
        return;
    };
    let image = registry.image("test/busybox:1");
    for (limits, named) in [
        (json!({"memory_mb": 512}), "memory_mb = 512"),
        (json!({"pids": 4096}), "pids = 4096"),
        (json!({"disk_mb": 65}), "disk_mb = 65"),
        (json!({"cpus": 2.5}), "cpus = 2.5"),
        (json!({"cpus": -1}), "cpus"),
        (json!({"swap_mb": 1}), "swap_mb"),
    ] {
        let reply = toold
            .post(
                "/v1/sessions",
                &json!({"environment": {"image": image, "limits": limits}}),
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{limits}: {}",
            reply.body
        );
        assert!(
            reply.body.to_string().contains(named),
            "{limits}: {}",
            reply.body
        );
    }
}

#[tokio::test]
async fn a_restarted_daemon_mounts_the_same_bounded_disk_again() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(&toold, &image, json!({"disk_mb": 20})).await;
    let wrote = bash(&toold, &id, "echo kept > /workspace/kept.txt").await;
    assert_eq!(wrote["is_error"], false, "{wrote}");
    let config = toold.dir.path().join("toold.toml");
    let mut toold = toold;
    toold.kill();
    let toold = Toold::start_with(toold.dir.clone(), &["--config", config.to_str().unwrap()]);
    let kept = bash(&toold, &id, "cat /workspace/kept.txt").await;
    assert_eq!(text(&kept), "kept\n", "{kept}");
    let full = bash(
        &toold,
        &id,
        "dd if=/dev/zero of=/workspace/big bs=1M count=100",
    )
    .await;
    assert!(text(&full).contains("No space left on device"), "{full}");
}
