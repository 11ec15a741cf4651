//! A 200 MB bash output through bash → spill → offload → SQLite with bounded memory.
//!
//! Its own test binary because it counts every heap allocation of the process with a global
//! allocator: the peak of live heap bytes during the call, above what was live before it,
//! must stay far below the output's size. One test only, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toold::dispatch::{DispatchDeps, DispatchSettings, Dispatcher, ResultStore};
use toold::event::EventBus;
use toold::hooks::HookChain;
use toold::permission::{Approvals, ModePolicy, PermissionSettings};
use toold::registry::calls::{BatchRequest, format_results};
use toold::service::{CreateSessionRequest, ServiceSettings, ToolService};
use toold::store::Store;
use toold::store::sqlite::SqliteStore;
use toold::tools::{
    BackgroundShells, SkillSettings, SpillSettings, ToolDeps, WebFetchSettings, builtin_registry,
};

/// Counts live heap bytes and their high-water mark.
struct CountingAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// plain atomics and allocate nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            if new_size >= layout.size() {
                let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed)
                    + (new_size - layout.size());
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const OUTPUT_BYTES: u64 = 200_000_000;
const PEAK_BUDGET: usize = 64 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_output_is_stored_whole_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let spill_dir = dir.path().join("spill");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&spill_dir).unwrap();
    let store = Arc::new(
        SqliteStore::open(&data.join("toold.db").to_string_lossy(), "node-a")
            .await
            .expect("store opens"),
    );
    let store_dyn: Arc<dyn Store> = store.clone();
    let events = EventBus::new(4096);
    let shells = Arc::new(BackgroundShells::with_spill_settings(SpillSettings {
        directory: spill_dir.clone(),
        ..SpillSettings::default()
    }));
    let registry = builtin_registry(&ToolDeps {
        results: store_dyn.clone(),
        web_fetch: WebFetchSettings::default(),
        skills: SkillSettings::default(),
        shells: shells.clone(),
    })
    .expect("registry");
    let dispatcher = Dispatcher::new(
        DispatchDeps {
            permission: Arc::new(ModePolicy),
            hooks: HookChain::default(),
            results: store_dyn.clone(),
            audit: store_dyn.clone(),
            events: events.clone(),
        },
        DispatchSettings {
            cancel_grace: Duration::from_secs(2),
            ..DispatchSettings::default()
        },
    );
    let service = Arc::new(ToolService::new(
        Arc::new(registry),
        dispatcher,
        store_dyn.clone(),
        events.clone(),
        shells,
        Arc::new(Approvals::new(store_dyn, events)),
        ServiceSettings {
            node_id: "node-a".into(),
            workspaces_dir: data.join("workspaces"),
            allowed_roots: vec![dir.path().to_path_buf()],
            permissions: PermissionSettings::default(),
            home: None,
            skill_directories: Vec::new(),
        },
    ));
    let request: CreateSessionRequest =
        serde_json::from_value(json!({"permission_mode": "danger_full_access"})).unwrap();
    // The local user, an admin (roles are not what this measures).
    let admin = toold::permission::Principal::local();
    let session = service
        .create_session(&admin, request)
        .await
        .expect("session");

    let command = format!("yes 'toold streams' | head -c {OUTPUT_BYTES}");
    let body = json!({"calls": [{"id": "huge", "name": "bash", "input": {"command": command}}]});
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let started = Instant::now();
    let request = BatchRequest::from_json(&body).expect("body parses");
    let outcome = service
        .execute_batch(&admin, &session.id, request)
        .await
        .expect("batch runs");
    let response = format_results(outcome.format, &outcome.batch_id, &outcome.results);
    let elapsed = started.elapsed();
    let peak = PEAK.load(Ordering::Relaxed) - before;

    let result = &response["results"][0];
    let total = result["offloaded"]["total_chars"]
        .as_u64()
        .expect("offloaded");
    eprintln!(
        "{OUTPUT_BYTES} bytes through bash → spill → SQLite in {elapsed:?}; peak heap above the start {:.1} MiB",
        peak as f64 / (1024.0 * 1024.0)
    );
    assert_eq!(
        total, OUTPUT_BYTES,
        "every byte is stored (ASCII: one character each)"
    );
    assert!(
        peak < PEAK_BUDGET,
        "peak heap {peak} bytes during the call; the budget is {PEAK_BUDGET}"
    );
    let result_id = result["offloaded"]["result_id"].as_str().unwrap();
    let tail = store
        .read(result_id, OUTPUT_BYTES - 15, 100)
        .await
        .expect("the end reads back");
    assert_eq!(tail.content.len(), 15);
    assert!("toold streams\ntoold streams\n".contains(&tail.content));
    let preview = result["output"].as_str().unwrap();
    assert!(preview.starts_with("toold streams\n") && preview.len() < 10_000);
    let left: Vec<_> = std::fs::read_dir(&spill_dir).unwrap().collect();
    assert!(left.is_empty(), "the spill file is deleted: {left:?}");
}
