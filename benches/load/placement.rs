//! Where the processes run, which on a small VM decides much of a single call's latency.
//!
//! A request and its answer each wake a thread. On the machines this is benchmarked on
//! (Firecracker VMs whose guest idles with `haltpoll` and `guest_halt_poll_ns = 0`), waking a
//! thread on the other vCPU costs tens of microseconds, on the same vCPU a few: so whether the
//! scheduler puts a server on the client's CPU or the other one moves a p50 more than the
//! server's own work does, and it may choose differently for toold and for the floor. This
//! measures that cost (a pipe ping-pong between two threads, on one CPU and across two) and
//! pins processes to one CPU, so the latency comparison can also be made with placement fixed.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const ROUND_TRIPS: usize = 5_000;

/// The CPUs this process may run on.
pub fn allowed() -> libc::cpu_set_t {
    // SAFETY: `set` is a plain bit set, zeroed then filled in by the kernel.
    unsafe {
        let mut set = std::mem::zeroed::<libc::cpu_set_t>();
        libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set);
        set
    }
}

/// The CPUs of `set`, lowest first.
pub fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
    // SAFETY: reads the set only.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, set) })
        .collect()
}

/// The set holding only `cpu`.
pub fn only(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: a zeroed set with one bit set.
    unsafe {
        let mut set = std::mem::zeroed::<libc::cpu_set_t>();
        libc::CPU_SET(cpu, &mut set);
        set
    }
}

/// Restricts every thread of process `pid` (0: this one) to `set`. Threads started later
/// inherit the mask of the thread that starts them.
pub fn pin_process(pid: u32, set: &libc::cpu_set_t) {
    let tasks = if pid == 0 {
        "/proc/self/task".to_owned()
    } else {
        format!("/proc/{pid}/task")
    };
    for entry in std::fs::read_dir(&tasks)
        .expect("the process's threads")
        .flatten()
    {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: `set` is a valid cpu_set_t; a thread that has exited meanwhile fails (ESRCH),
        // which is fine.
        unsafe {
            libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), set);
        }
    }
}

/// Runs `measure` in the two fixed placements the paired benches compare in: this process (the
/// client) on the first CPU and every thread of `servers` on the second, then all of them on
/// the first; each result with its placement's label. Empty with a single CPU. Every
/// affinity is given back afterwards.
pub async fn in_fixed_placements<T>(
    servers: &[u32],
    mut measure: impl AsyncFnMut() -> T,
) -> Vec<(String, T)> {
    let allowed = allowed();
    let [first, second, ..] = cpus(&allowed)[..] else {
        return Vec::new();
    };
    pin_process(0, &only(first));
    let mut results = Vec::new();
    for (cpu, label) in [
        (
            second,
            format!("the client on CPU {first}, the servers on CPU {second}"),
        ),
        (first, format!("the client and the servers on CPU {first}")),
    ] {
        for &pid in servers {
            pin_process(pid, &only(cpu));
        }
        results.push((label, measure().await));
    }
    for &pid in servers.iter().chain([&0]) {
        pin_process(pid, &allowed);
    }
    results
}

/// The processes below `pid` (its children, theirs, …), from `/proc/<pid>/task/*/children`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut pending = vec![pid];
    while let Some(parent) = pending.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                pending.push(child);
            }
        }
    }
    found
}

/// The p50 round trip of one byte between two threads, the answering one on `server_cpu` and
/// the asking one on `client_cpu`: two wake-ups, no other work.
pub fn wake_round_trip(client_cpu: usize, server_cpu: usize) -> Duration {
    let (mut client, mut server) = UnixStream::pair().expect("a socket pair");
    let answering = std::thread::spawn(move || {
        pin_thread(server_cpu);
        let mut byte = [0u8; 1];
        while server.read_exact(&mut byte).is_ok() {
            if server.write_all(&byte).is_err() {
                break;
            }
        }
    });
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            pin_thread(client_cpu);
            let mut byte = [7u8; 1];
            for n in 0..ROUND_TRIPS + ROUND_TRIPS / 10 {
                let started = Instant::now();
                client.write_all(&byte).expect("ping");
                client.read_exact(&mut byte).expect("pong");
                if n >= ROUND_TRIPS / 10 {
                    samples.push(started.elapsed());
                }
            }
        });
    });
    drop(client);
    let _ = answering.join();
    samples.sort();
    samples[samples.len() / 2]
}

fn pin_thread(cpu: usize) {
    let set = only(cpu);
    // SAFETY: 0 is the calling thread; `set` is a valid cpu_set_t.
    unsafe {
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}
