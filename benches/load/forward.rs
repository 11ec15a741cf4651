//! The forwarding hop's cost (issue 23): two daemons of one fleet (a fresh schema on the
//! Postgres of `TOOLD_BENCH_POSTGRES_URL` or `TOOLD_TEST_POSTGRES_URL`, one fleet secret), a
//! session on A, and the single `read_file` call of the latency bench sent to A directly and
//! through B (which forwards it to A), in alternating rounds over one keep-alive connection
//! each, in one run. Budget: the hop adds at most 100 µs at p50. Every call's audit row is
//! then checked. Selected alone with `TOOLD_BENCH_ONLY=forward`.

use std::net::SocketAddr;
use std::time::Duration;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::placement;
use super::{
    FILE_NAME, PAIRED_ROUND, PAIRED_ROUNDS, WARM_UP, alternate_pair, batch, create_session,
    fixture_dir, percentiles, projects_in, time_requests, us, verdict, verify_audit,
};

/// What the hop may add to a single call's p50.
const HOP_BUDGET: Duration = Duration::from_micros(100);

/// A schema of the bench's own on a Postgres server, dropped by [`BenchSchema::drop_schema`].
pub struct BenchSchema {
    admin: sqlx::PgConnection,
    name: String,
    /// The server's URL with the schema as its search path.
    pub url: String,
}

impl BenchSchema {
    /// A fresh schema on the bench's Postgres, or `None` when none is configured.
    pub async fn create() -> Option<BenchSchema> {
        let server = ["TOOLD_BENCH_POSTGRES_URL", "TOOLD_TEST_POSTGRES_URL"]
            .iter()
            .find_map(|name| std::env::var(name).ok().filter(|url| !url.is_empty()))?;
        let name = format!("bench_{}", uuid::Uuid::now_v7().simple());
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&server)
            .await
            .expect("connects to the Postgres server");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut admin)
            .await
            .expect("creates the bench schema");
        let separator = if server.contains('?') { '&' } else { '?' };
        let url = format!("{server}{separator}options=-csearch_path%3D{name}");
        Some(BenchSchema { admin, name, url })
    }

    pub async fn drop_schema(mut self) {
        let drop = format!("DROP SCHEMA {} CASCADE", self.name);
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
            .execute(&mut self.admin)
            .await;
    }
}

pub async fn report() {
    let Some(schema) = BenchSchema::create().await else {
        println!("forwarding hop:      skipped (set TOOLD_BENCH_POSTGRES_URL)");
        return;
    };
    let (dir_a, dir_b) = (fixture_dir(), fixture_dir());
    let config = dir_a.path().join("fleet.toml");
    std::fs::write(&config, "[server]\nfleet_secret = \"bench-secret\"\n").expect("config");
    let config = config.to_str().expect("a UTF-8 path");
    let flags = ["--database-url", schema.url.as_str(), "--config", config];
    let a = Daemon::start_with(dir_a.path(), &flags).await;
    let b = Daemon::start_with(dir_b.path(), &flags).await;
    let projects = projects_in(dir_a.path());
    let session = create_session(a.address, &projects).await;
    let calls = measure((a.address, a.pid()), (b.address, b.pid()), &session).await;
    verify_audit(a.address, &session, calls).await;
    println!("audit (forwarding):  {calls} rows = every call made, direct and forwarded");
    a.terminate();
    b.terminate();
    schema.drop_schema().await;
}

/// Alternating rounds to the owner and through the other daemon; the calls made.
async fn measure(
    (owner, owner_pid): (SocketAddr, u32),
    (other, other_pid): (SocketAddr, u32),
    session: &str,
) -> usize {
    let path = format!("/v1/sessions/{session}/batches");
    let mut direct = Connection::open(owner).await.expect("connects to A");
    let mut hop = Connection::open(other).await.expect("connects to B");
    let to_owner = PreparedRequest::post_json(owner, &path, &batch(1));
    let through_other = PreparedRequest::post_json(other, &path, &batch(1));
    let answer = hop.send(&through_other).await.expect("a forwarded batch");
    let output = answer.json()["results"][0]["output"]
        .as_str()
        .map(str::to_owned);
    assert!(
        output.is_some_and(|output| output.contains("64\t63 abcdef")),
        "the forwarded call reads {FILE_NAME}"
    );
    time_requests(&mut direct, &to_owner, WARM_UP).await;
    time_requests(&mut hop, &through_other, WARM_UP).await;
    // The first forwarded batch, the warm-ups, then each comparison's rounds.
    let mut made = 1 + 2 * WARM_UP;
    let mut alternate = async || {
        made += 2 * PAIRED_ROUNDS * PAIRED_ROUND;
        alternate_pair((&mut direct, &to_owner), (&mut hop, &through_other)).await
    };
    println!("unpinned:");
    print_hop(alternate().await);
    // Placement fixed (see `traces.rs` for why on this 2-vCPU machine); Postgres is left free.
    for (label, samples) in placement::in_fixed_placements(&[owner_pid, other_pid], alternate).await
    {
        println!("{label}:");
        print_hop(samples);
    }
    // The hop alone, on a request the owner answers from memory (the session's tool list,
    // forwarded like a batch): no store write, so neither daemon sits idle waiting for
    // Postgres's commit between the hop's two halves. Not the budget's figure; it shows what
    // of the batch's difference is the hop's own work and what is waking idle vCPUs.
    let tools = format!("/v1/sessions/{session}/tools");
    let (tools_owner, tools_other) = (
        PreparedRequest::get(owner, &tools),
        PreparedRequest::get(other, &tools),
    );
    time_requests(&mut direct, &tools_owner, WARM_UP).await;
    time_requests(&mut hop, &tools_other, WARM_UP).await;
    let [mut direct_samples, mut hop_samples] =
        alternate_pair((&mut direct, &tools_owner), (&mut hop, &tools_other)).await;
    let (direct_p50, _) = percentiles(&mut direct_samples);
    let (hop_p50, _) = percentiles(&mut hop_samples);
    println!(
        "the hop on GET …/tools (answered from memory, unpinned): owner p50 {:.1} µs, \
         through a non-owner {:.1} µs: +{:.1} µs",
        us(direct_p50),
        us(hop_p50),
        us(hop_p50.saturating_sub(direct_p50))
    );
    made
}

/// Prints the owner's and the hop's p50 and the difference.
fn print_hop([mut direct_samples, mut hop_samples]: [Vec<Duration>; 2]) {
    let (direct_p50, direct_p99) = percentiles(&mut direct_samples);
    let (hop_p50, hop_p99) = percentiles(&mut hop_samples);
    let added = hop_p50.saturating_sub(direct_p50);
    println!(
        "  owner directly:      p50 {:.1} µs, p99 {:.1} µs ({} calls, Postgres)",
        us(direct_p50),
        us(direct_p99),
        direct_samples.len()
    );
    println!(
        "  through a non-owner: p50 {:.1} µs, p99 {:.1} µs ({} calls, forwarded to the owner)",
        us(hop_p50),
        us(hop_p99),
        hop_samples.len()
    );
    println!(
        "  forwarding hop:      +{:.1} µs at p50  (budget ≤ +100 µs: {})",
        us(added),
        verdict(added <= HOP_BUDGET)
    );
}
