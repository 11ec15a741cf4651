//! `toold audit` against the real daemon: the flags a security review starts from
//! (`--principal`, `--tool`, `--decision denied`, `--since 24h`) select the rows the API
//! does, as a table, JSON or the export's CSV; a bad flag value is a usage error (exit 2).

use serde_json::{Value, json};

use super::harness::run;
use crate::http::harness::Toold;

#[tokio::test]
async fn audit_filters_print_as_a_table_json_or_csv() {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, "[permissions]\ndeny = [\"bash(rm:*)\"]\n").unwrap();
    let config = config.to_str().unwrap().to_owned();
    let toold = Toold::start_with(dir, &["--config", &config, "--auth-token", "secret"]);
    let session = toold.session().await;
    toold
        .run_batch(
            &session,
            json!([
                {"id": "ok", "name": "bash", "input": {"command": "echo hi"}},
                {"id": "no", "name": "bash", "input": {"command": "rm -rf build"}},
                {"id": "read", "name": "glob_search", "input": {"pattern": "*"}},
            ]),
        )
        .await;

    let denied = [
        "audit",
        "--tool",
        "bash",
        "--decision",
        "denied",
        "--since",
        "24h",
    ];
    let table = run(&toold, &denied).await;
    assert_eq!(table.code, 0, "{table:?}");
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "STARTED_AT\tPRINCIPAL\tSESSION\tTOOL\tDECISION\tDECIDED_BY\tERROR\tCALL_ID"
    );
    assert_eq!(lines.len(), 2, "{table:?}");
    let cells: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(
        &cells[2..],
        [
            session.as_str(),
            "bash",
            "deny",
            "rule",
            "permission_denied",
            "no"
        ]
    );

    let json_run = run(&toold, &["audit", "--tool", "bash", "-o", "json"]).await;
    assert_eq!(json_run.code, 0, "{json_run:?}");
    let rows: Vec<Value> = serde_json::from_str(&json_run.stdout).unwrap();
    let calls: Vec<&str> = rows
        .iter()
        .map(|r| r["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["no", "ok"]);

    let csv = run(&toold, &["audit", "--decision", "allowed", "-o", "csv"]).await;
    assert_eq!(csv.code, 0, "{csv:?}");
    let mut reader = csv::Reader::from_reader(csv.stdout.as_bytes());
    assert_eq!(&reader.headers().unwrap()[4], "call_id");
    let calls: Vec<String> = reader.records().map(|r| r.unwrap()[4].to_owned()).collect();
    assert_eq!(calls, ["read", "ok"]);

    // Nothing this old: the header alone, and "no calls" on stderr.
    let none = run(&toold, &["audit", "--until", "3650d"]).await;
    assert_eq!(none.code, 0, "{none:?}");
    assert_eq!(none.stdout.lines().count(), 1);
    assert!(none.stderr.contains("no calls"), "{none:?}");

    for bad in [
        vec!["audit", "--decision", "maybe"],
        vec!["audit", "--since", "last tuesday"],
        vec!["sessions", "-o", "csv"],
    ] {
        let ran = run(&toold, &bad).await;
        assert_eq!(ran.code, 2, "{bad:?}: {ran:?}");
    }
}
