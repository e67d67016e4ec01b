//! Session snapshots through a real loom, re-opened by `loom query`.

use crate::common;
use crate::s3;

use std::process::Command;

use common::*;
use serde_json::{Value, json};

fn loom_query(args: &[&str]) -> (i32, String, String) {
    loom_query_with(args, &[])
}

fn loom_query_with(args: &[&str], envs: &[(String, String)]) -> (i32, String, String) {
    loom_command("query", args, envs)
}

/// `loom <command> args` with `envs`: exit code, stdout, stderr.
fn loom_command(command: &str, args: &[&str], envs: &[(String, String)]) -> (i32, String, String) {
    let out = Command::new(loom_bin())
        .arg(command)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A loom with snapshots under `root`, after two datasets and a view were made.
fn session(root: &std::path::Path) -> RawClient {
    session_at(&root.to_string_lossy(), &[])
}

fn session_at(url: &str, envs: &[(String, String)]) -> RawClient {
    let (dir, path) = write_config(&json!({
        "snapshot": {"url": url},
        "servers": [fixture_server("crm", &[]), fixture_server("shop", &[])]
    }));
    std::mem::forget(dir);
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut loom = RawClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &envs,
    );
    loom.initialize();
    loom.call_tool(
        "crm_rows",
        json!({"count": 3000, "token": "secret-token-value"}),
    );
    loom.call_tool("shop_orders", json!({"count": 4000, "users": 3000}));
    loom.call_tool(
        "loom_materialize",
        json!({"name": "per_plan", "sql": "SELECT plan, count(*) AS n FROM ds_crm_rows_1 GROUP BY plan"}),
    );
    loom
}

#[test]
fn a_session_reopens_with_types_and_redacted_provenance() {
    let root = tempfile::tempdir().expect("root");
    let mut loom = session(root.path());
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let url = root.path().to_str().expect("utf8");

    let (code, out, err) = loom_query(&["--snapshot", url, "--list"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "ds_crm_rows_1  3000 rows",
        "ds_shop_orders_1  4000 rows",
        "ds_view_per_plan",
        "created Timestamp",
        "[redacted]",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    assert!(!out.contains("secret-token-value"));
    // `--session` takes the id or the folder's name as engines show it.
    let folder = std::fs::read_dir(root.path())
        .expect("root")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("session_id="))
        .expect("a session_id= folder");
    let id = folder.trim_start_matches("session_id=");
    for session in [folder.as_str(), id] {
        let (code, out, err) = loom_query(&["--snapshot", url, "--session", session, "--list"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("session {id}")), "{out}");
    }

    let (code, out, err) = loom_query(&[
        "--snapshot",
        url,
        "--format",
        "json",
        "SELECT count(*) AS n, sum(o.amount) > 0 AS positive FROM ds_shop_orders_1 o JOIN ds_crm_rows_1 u ON o.user_id = u.id",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(rows[0]["n"], 4000);
    assert_eq!(rows[0]["positive"], true);

    let (code, out, _) = loom_query(&[
        "--snapshot",
        url,
        "SELECT plan, n FROM ds_view_per_plan ORDER BY plan",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("| free |") && out.contains("3 rows in"),
        "{out}"
    );
    let (code, out, _) = loom_query(&[
        "--snapshot",
        url,
        "--format",
        "csv",
        "SELECT id FROM ds_crm_rows_1 ORDER BY id LIMIT 2",
    ]);
    assert_eq!((code, out.as_str()), (0, "id\r\n0\r\n1\r\n"));
    let (code, out, _) = loom_query(&[
        "--snapshot",
        url,
        "--format",
        "ndjson",
        "SELECT id, created FROM ds_crm_rows_1 ORDER BY id LIMIT 1",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "{\"id\":0,\"created\":\"2024-01-01T00:00:00Z\"}\n")
    );
    let (code, out, _) = loom_query(&["--snapshot", url, "--describe", "ds_crm_rows_1"]);
    assert_eq!(code, 0);
    let described: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(described["rows"], 3000);
}

#[test]
fn query_errors_are_clear_and_exit_non_zero() {
    let root = tempfile::tempdir().expect("root");
    let url = root.path().to_str().expect("utf8");
    let (code, _, err) = loom_query(&["--snapshot", "/no/such/dir", "SELECT 1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no snapshot at /no/such/dir"), "{err}");
    let (code, _, err) = loom_query(&["--snapshot", url, "SELECT 1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no snapshot sessions"), "{err}");

    let mut loom = session(root.path());
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let (code, _, err) = loom_query(&["--snapshot", url, "COPY (SELECT 1) TO '/tmp/x.csv'"]);
    assert_eq!(code, 1);
    assert!(err.contains("refused: only read-only queries"), "{err}");
    let (code, _, err) = loom_query(&["--snapshot", url, "SELECT nope FROM ds_crm_rows_1"]);
    assert_eq!(code, 1);
    assert!(err.contains("nope"), "{err}");
    let (code, _, err) = loom_query(&["--snapshot", url, "--session", "nope", "SELECT 1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no session `nope`"), "{err}");
    let (code, _, err) = loom_query(&["--snapshot", url]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_killed_loom_leaves_a_snapshot_that_opens() {
    let root = tempfile::tempdir().expect("root");
    let mut loom = session(root.path());
    // Give the writer a moment to finish at least the first dataset, then kill without warning.
    let url = root.path().to_str().expect("utf8").to_string();
    eventually("the first dataset is in the manifest", || {
        let (code, out, _) = loom_query(&["--snapshot", &url, "--list"]);
        code == 0 && out.contains("ds_crm_rows_1")
    });
    loom.child.kill().expect("kill");
    let _ = loom.child.wait();
    let (code, out, err) = loom_query(&[
        "--snapshot",
        &url,
        "SELECT count(*) AS n FROM ds_crm_rows_1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("3000"), "{out}");
    // No temporary file is left where a dataset should be.
    let session = std::fs::read_dir(root.path())
        .expect("root")
        .next()
        .expect("session")
        .expect("entry")
        .path();
    assert!(
        session
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("session_id=")),
        "{session:?}"
    );
    let mut files = Vec::new();
    let mut folders = vec![session.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("folder").flatten() {
            if entry.path().is_dir() {
                folders.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    assert!(files.iter().any(|f| f.ends_with("manifest.json")));
    for file in files {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let known = matches!(
            name.as_str(),
            "manifest.json" | "catalog.sql" | "catalog.spark.sql"
        );
        assert!(known || name.ends_with(".parquet"), "stray file {file:?}");
    }
}

/// A reduced result's original (SPEC §19.4) is written like a dataset and searchable later.
#[test]
fn documents_are_snapshotted_and_searchable_later() {
    let root = tempfile::tempdir().expect("root");
    let (dir, path) = write_config(&json!({
        "snapshot": {"url": root.path()},
        "servers": [fixture_server("fx", &[])]
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let log: String = (1..=5000)
        .map(|n| {
            if n == 42 {
                "ERROR disk full\n".to_string()
            } else {
                format!("INFO request {n} ok\n")
            }
        })
        .collect();
    let result = json!({"content": [{"type": "text", "text": log}]});
    let line = loom.call_tool("fx_raw", json!({"json": result.to_string()}));
    assert!(
        first_text(&line).starts_with("[loom: text reduced"),
        "{:.300}",
        line.raw
    );
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    drop(dir);
    let url = root.path().to_str().expect("utf8");
    let (code, out, err) = loom_query(&[
        "--snapshot",
        url,
        "--format",
        "csv",
        "SELECT line_no, text FROM doc_1 WHERE text LIKE 'ERROR%'",
    ]);
    assert_eq!(code, 0, "{err}");
    // RFC 4180 line ends.
    assert_eq!(out.trim(), "line_no,text\r\n42,ERROR disk full");
    let sessions: Vec<_> = std::fs::read_dir(root.path())
        .expect("root")
        .flatten()
        .collect();
    let manifest =
        std::fs::read_to_string(sessions[0].path().join("manifest.json")).expect("manifest");
    let manifest: Value = serde_json::from_str(&manifest).expect("json");
    let entry = manifest["datasets"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["ref"] == "doc_1"))
        .expect("doc_1 in the manifest");
    assert_eq!(entry["kind"], "document");
}

/// The same session on a real S3-compatible server (moto): written through loom, read back by
/// `loom query`; the secret key appears in no output, manifest or catalog.
#[test]
fn a_session_on_s3_reopens_and_never_shows_the_secret() {
    let Some(moto) = s3::moto() else { return };
    let bucket = moto.bucket("loom-reopen");
    let url = format!("s3://{bucket}/team");
    let env = moto.env();
    let mut loom = session_at(&url, &env);
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let stderr = loom.stderr_text();
    assert!(!stderr.contains(s3::SECRET_KEY));
    assert!(!stderr.contains("snapshot write"), "{stderr}");

    let (code, out, err) = loom_query_with(&["--snapshot", &url, "--list"], &env);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "ds_crm_rows_1  3000 rows",
        "ds_shop_orders_1  4000 rows",
        "ds_view_per_plan",
        "[redacted]",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    let (code, out, err) = loom_query_with(
        &[
            "--snapshot",
            &url,
            "--format",
            "csv",
            "SELECT count(*) AS n FROM ds_shop_orders_1",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "n\r\n4000");
    // What is in the bucket: Hive-style folders, both catalogs, no secret anywhere.
    let keys = moto.object("keys", &bucket, "team/");
    for needle in [
        "/manifest.json",
        "/catalog.sql",
        "/catalog.spark.sql",
        "/server=crm/tool=rows/ref=ds_crm_rows_1/ds_crm_rows_1.parquet",
    ] {
        assert!(keys.contains(needle), "{needle} not in {keys}");
    }
    let folder = keys
        .lines()
        .find(|k| k.ends_with("/catalog.spark.sql"))
        .expect("catalog.spark.sql")
        .trim_end_matches("catalog.spark.sql")
        .to_string();
    for file in ["manifest.json", "catalog.sql", "catalog.spark.sql"] {
        let body = moto.object("get", &bucket, &format!("{folder}{file}"));
        assert!(!body.contains(s3::SECRET_KEY), "{file}");
        assert!(!body.contains(s3::ACCESS_KEY), "{file}");
    }
    let (code, out, err) = loom_snapshots_with(&["list", "--snapshot", &url], &env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("1 sessions under {url}")), "{out}");
    assert!(
        out.lines().nth(1).is_some_and(|l| l.ends_with(" yes")),
        "{out}"
    );
    let spark = moto.object("get", &bucket, &format!("{folder}catalog.spark.sql"));
    assert!(
        spark.contains(&format!("(path 's3a://{bucket}/team/session_id=")),
        "{spark}"
    );
}

/// Killed mid-session: what the manifest lists opens. Then an object the manifest lists goes
/// missing: the session is reported partial.
#[test]
fn a_killed_loom_on_s3_leaves_what_its_manifest_lists() {
    let Some(moto) = s3::moto() else { return };
    let bucket = moto.bucket("loom-killed");
    let url = format!("s3://{bucket}/k");
    let env = moto.env();
    let mut loom = session_at(&url, &env);
    eventually("the view is in the manifest", || {
        let (code, out, _) = loom_query_with(&["--snapshot", &url, "--list"], &env);
        code == 0 && out.contains("ds_view_per_plan")
    });
    let _ = loom.child.kill();
    let _ = loom.child.wait();
    let (code, out, err) = loom_query_with(
        &[
            "--snapshot",
            &url,
            "SELECT count(*) AS n FROM ds_crm_rows_1",
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("3000"), "{out}");

    let keys = moto.object("keys", &bucket, "k/");
    let parquet = keys
        .lines()
        .find(|k| k.ends_with("ds_crm_rows_1.parquet"))
        .expect("the dataset's object");
    moto.object("delete", &bucket, parquet);
    let (code, _, err) = loom_query_with(&["--snapshot", &url, "--list"], &env);
    assert_eq!(code, 1);
    assert!(err.contains("is partial: its manifest lists server=crm/tool=rows/ref=ds_crm_rows_1/ds_crm_rows_1.parquet (ds_crm_rows_1)"), "{err}");
}

/// Failures name what happened; a snapshot store that is not there never breaks the session.
#[test]
fn s3_failures_are_named_and_never_break_the_session() {
    let Some(moto) = s3::moto() else { return };
    let env = moto.env();
    let (code, _, err) = loom_query_with(&["--snapshot", "s3://no-such-bucket/x", "--list"], &env);
    assert_eq!(code, 1);
    assert!(err.contains("no such bucket `no-such-bucket`"), "{err}");
    assert!(err.contains(&moto.endpoint()), "{err}");

    let mut unreachable = env.clone();
    unreachable.retain(|(k, _)| k != "AWS_ENDPOINT_URL");
    unreachable.push(("AWS_ENDPOINT_URL".into(), "http://127.0.0.1:1".into()));
    let (code, _, err) = loom_query_with(&["--snapshot", "s3://b/x", "--list"], &unreachable);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot reach the store at http://127.0.0.1:1"),
        "{err}"
    );

    // Writes to a bucket that does not exist: calls still answer, datasets stay queryable, one
    // warning for the kind however many datasets fail.
    let mut loom = session_at("s3://no-such-bucket/live", &env);
    let answer = query(&mut loom, "SELECT count(*) AS n FROM ds_crm_rows_1");
    assert!(answer.to_string().contains("3000"), "{answer}");
    eventually("the failure is logged", || {
        loom.stderr_text().contains("no such bucket")
    });
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let stderr = loom.stderr_text();
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("no such bucket") && l.contains("retried"))
        .count();
    assert_eq!(warnings, 1, "{stderr}");
    assert!(!stderr.contains(s3::SECRET_KEY));
}

/// DataFusion's Python bindings (through catalog.sql), DuckDB (through the Hive-style folders)
/// and Apache Spark (through catalog.spark.sql) open a snapshot loom wrote and give the answers
/// `loom query` gives, unusual types included; Spark and DuckDB also read one tool's datasets of
/// every session at once. The engines run in tests/engines/test_engines.py.
#[test]
fn engines_read_a_snapshot_with_loom_s_answers() {
    let python = s3::data_python();
    if !python.exists() {
        assert!(
            !s3::in_ci(),
            "{} is missing: {}",
            python.display(),
            s3::SETUP_HINT
        );
        eprintln!(
            "\n*** engine tests SKIPPED: {} is missing; {} ***\n",
            python.display(),
            s3::SETUP_HINT
        );
        return;
    }
    let root = tempfile::tempdir().expect("root");
    let url = root.path().to_str().expect("utf8").to_string();
    let mut loom = session(root.path());
    // A document too: its table's text column is a string view in Arrow.
    let log: String = (1..=3000)
        .map(|n| {
            format!(
                "{} request {n}\n",
                if n % 100 == 42 { "ERROR" } else { "INFO" }
            )
        })
        .collect();
    let result = json!({"content": [{"type": "text", "text": log}]});
    let line = loom.call_tool("crm_raw", json!({"json": result.to_string()}));
    assert!(
        first_text(&line).starts_with("[loom: text reduced"),
        "{:.300}",
        line.raw
    );
    for (name, sql) in [
        (
            "tricky",
            "SELECT plan AS k, upper(plan) AS \"K\", arrow_cast(count(*), 'UInt64') AS n_u64, \
             arrow_cast(count(*) % 200, 'UInt8') AS small, \
             to_timestamp('2024-01-02T03:04:05.123456Z') AS stamp, INTERVAL '1 day 2 hours' AS gap, \
             NULL AS nothing, count(*) AS \"count(*)\" FROM ds_crm_rows_1 GROUP BY plan",
        ),
        (
            "fine",
            "SELECT plan AS k, to_timestamp('2024-01-02T03:04:05.123456789Z') AS at_fine \
             FROM ds_crm_rows_1 GROUP BY plan",
        ),
    ] {
        let line = loom.call_tool("loom_materialize", json!({"name": name, "sql": sql}));
        assert_not_error(&line);
    }
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let first = only_session(root.path());
    // A second, smaller session in the same root.
    let (dir, path) = write_config(&json!({
        "snapshot": {"url": &url},
        "servers": [fixture_server("crm", &[])]
    }));
    let mut second = RawClient::loom(&path);
    second.initialize();
    second.call_tool("crm_rows", json!({"count": 1000}));
    second.close_stdin();
    assert!(second.wait_exit().success());
    drop(dir);
    let folders = session_folders(root.path());
    assert_eq!(folders.len(), 2, "{folders:?}");
    let second_folder = folders
        .iter()
        .find(|f| **f != first)
        .expect("second")
        .clone();

    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engines/queries.sql"),
    )
    .expect("queries.sql");
    let mut queries = Vec::new();
    let mut answers = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with("--") && !l.trim().is_empty())
    {
        let (spark, duckdb, sql) = match line.split_once("] ") {
            Some(("[no-spark", sql)) => (false, true, sql),
            Some(("[no-duckdb", sql)) => (true, false, sql),
            _ => (true, true, line),
        };
        let (code, out, err) = loom_query(&[
            "--snapshot",
            &url,
            "--session",
            &first,
            "--format",
            "json",
            sql,
        ]);
        assert_eq!(code, 0, "{sql}: {err}");
        let rows: Value = serde_json::from_str(&out).expect("json answer");
        assert!(
            rows.as_array().is_some_and(|r| !r.is_empty()),
            "{sql}: {out}"
        );
        queries.push(json!({"sql": sql, "spark": spark, "duckdb": duckdb}));
        answers.push(rows);
    }
    let id = |folder: &str| folder.trim_start_matches("session_id=").to_string();
    let expected = json!({
        "queries": queries,
        "answers": answers,
        "per_session": {id(&first): 3000, id(&second_folder): 1000},
    });
    let expected_path = root.path().join("expected.json");
    std::fs::write(&expected_path, expected.to_string()).expect("expected.json");
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/engines/test_engines.py",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("LOOM_SNAPSHOT_ROOT", root.path())
        .env("LOOM_SESSION_FOLDER", &first)
        .env("LOOM_EXPECTED", &expected_path)
        .output()
        .expect("pytest");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    // Every engine ran every query, plus the cross-session read and the README's three
    // examples: nothing skipped.
    let summary = report
        .lines()
        .rev()
        .find(|l| l.contains("passed"))
        .unwrap_or_default();
    assert!(
        summary.contains(&format!("{} passed", 3 * queries.len() + 1 + 3)),
        "{report}"
    );
    assert!(!summary.contains("skipped"), "{report}");
}

fn session_folders(root: &std::path::Path) -> Vec<String> {
    let mut folders: Vec<String> = std::fs::read_dir(root)
        .expect("root")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("session_id="))
        .collect();
    folders.sort();
    folders
}

fn only_session(root: &std::path::Path) -> String {
    let folders = session_folders(root);
    assert_eq!(folders.len(), 1, "{folders:?}");
    folders[0].clone()
}

/// `--all-sessions`: every session under the root as one catalog; cross-session questions are
/// one statement.
#[test]
fn all_sessions_make_one_catalog() {
    let root = tempfile::tempdir().expect("root");
    for _ in 0..2 {
        let mut loom = session(root.path());
        loom.close_stdin();
        assert!(loom.wait_exit().success());
    }
    let url = root.path().to_str().expect("utf8");
    let (code, out, err) = loom_query(&["--snapshot", url, "--all-sessions", "--list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("2 sessions under"), "{out}");
    assert!(
        out.contains("ds_crm_rows  6000 rows from 2 datasets in 2 sessions"),
        "{out}"
    );

    let out = all_sessions_csv(
        url,
        "SELECT server, tool, count(*) AS datasets, sum(rows) AS rows, \
         count(DISTINCT session_id) AS sessions, bool_and(session_complete) AS complete \
         FROM loom_catalog GROUP BY server, tool ORDER BY rows DESC",
    );
    assert_eq!(
        out,
        "server,tool,datasets,rows,sessions,complete\r\n\
         shop,orders,2,8000,2,true\r\ncrm,rows,2,6000,2,true\r\nloom,loom_materialize,2,6,2,true\r\n"
    );
    // Provenance as the live session showed it: redacted.
    let out = all_sessions_csv(url, "SELECT args FROM loom_catalog WHERE tool = 'rows'");
    assert_eq!(out.matches("[redacted]").count(), 2, "{out}");
    assert!(!out.contains("secret-token-value"), "{out}");

    // One table per ref family, with the session as a column, joinable like any table.
    let out = all_sessions_csv(
        url,
        "SELECT count(DISTINCT o.session_id) AS sessions, count(*) AS orders \
         FROM ds_shop_orders o JOIN ds_crm_rows c \
         ON o.session_id = c.session_id AND o.user_id = c.id",
    );
    assert_eq!(out, "sessions,orders\r\n2,8000\r\n");
    let (code, _, err) = loom_query(&[
        "--snapshot",
        url,
        "--all-sessions",
        "--session",
        "x",
        "--list",
    ]);
    assert_eq!(code, 2, "{err}");
}

/// `loom query --all-sessions --format csv SQL` that must succeed; its output.
fn all_sessions_csv(url: &str, sql: &str) -> String {
    let (code, out, err) =
        loom_query(&["--snapshot", url, "--all-sessions", "--format", "csv", sql]);
    assert_eq!(code, 0, "{sql}: {err}");
    out
}

fn loom_snapshots(args: &[&str]) -> (i32, String, String) {
    loom_snapshots_with(args, &[])
}

fn loom_snapshots_with(args: &[&str], envs: &[(String, String)]) -> (i32, String, String) {
    loom_command("snapshots", args, envs)
}

/// `loom snapshots list|gc`: ages count from a session's last write; gc shows what it would
/// delete and deletes only with --delete, only what is old enough, sessions of the first layout
/// too.
#[test]
fn snapshots_are_listed_and_old_ones_collected() {
    let root = tempfile::tempdir().expect("root");
    let mut loom = session(root.path());
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let old_folder = only_session(root.path());
    // Make it 40 days old, and add an old session of the first layout beside it.
    let forty_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 86_400);
    let v1 = root.path().join("20200101T000000000Z-1");
    std::fs::create_dir_all(v1.join("datasets")).expect("v1");
    std::fs::write(v1.join("manifest.json"), r#"{"loomVersion":"0","session":"20200101T000000000Z-1","createdAt":"2020-01-01T00:00:00.000Z","datasets":[]}"#).expect("manifest");
    let mut folders = vec![root.path().join(&old_folder), v1.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("dir").flatten() {
            if entry.path().is_dir() {
                folders.push(entry.path());
            } else {
                std::fs::File::options()
                    .write(true)
                    .open(entry.path())
                    .and_then(|f| f.set_modified(forty_days_ago))
                    .expect("set mtime");
            }
        }
    }
    let mut fresh = session(root.path());
    fresh.close_stdin();
    assert!(fresh.wait_exit().success());
    let url = root.path().to_str().expect("utf8");

    let (code, out, err) = loom_snapshots(&["list", "--snapshot", url]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("3 sessions under"), "{out}");
    let old_id = old_folder.trim_start_matches("session_id=");
    let old_line = out
        .lines()
        .find(|l| l.starts_with(old_id))
        .expect("old session listed");
    assert!(
        old_line.contains(" 40d ") && old_line.ends_with("yes"),
        "{old_line}"
    );

    let (code, out, err) = loom_snapshots(&["gc", "--snapshot", url, "--older-than", "30d"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("would delete {old_id}")), "{out}");
    assert!(out.contains("would delete 20200101T000000000Z-1"), "{out}");
    assert!(out.contains("2 sessions"), "{out}");
    assert_eq!(
        session_folders(root.path()).len(),
        2,
        "a dry run deleted something"
    );

    let (code, out, err) =
        loom_snapshots(&["gc", "--snapshot", url, "--older-than", "30d", "--delete"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 sessions deleted"), "{out}");
    assert!(!v1.exists());
    let left = session_folders(root.path());
    assert_eq!(left.len(), 1);
    assert_ne!(left[0], old_folder);
    let (code, out, err) = loom_query(&["--snapshot", url, "--list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ds_crm_rows_1"), "{out}");

    let (code, _, err) = loom_snapshots(&["gc", "--snapshot", url, "--older-than", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("e.g. 30d"), "{err}");
}

/// On a server that checks credentials: unknown keys and keys without permission are each named
/// (without the secret), and a session whose snapshots are refused keeps answering.
#[test]
fn refused_credentials_and_permissions_are_named() {
    let Some(moto) = s3::locked_moto() else {
        return;
    };
    let Some((id, secret)) = moto.keys.clone() else {
        panic!("the locked server gave no keys")
    };
    let with_keys = |id: &str, secret: &str| {
        let mut env = moto.env();
        env.retain(|(k, _)| k != "AWS_ACCESS_KEY_ID" && k != "AWS_SECRET_ACCESS_KEY");
        env.push(("AWS_ACCESS_KEY_ID".into(), id.into()));
        env.push(("AWS_SECRET_ACCESS_KEY".into(), secret.into()));
        env
    };
    let unknown = with_keys("AKIAUNKNOWNUNKNOWN01", "unknown-secret-2f9c");
    let (code, _, err) = loom_query_with(&["--snapshot", "s3://locked/x", "--list"], &unknown);
    assert_eq!(code, 1);
    assert!(err.contains("the store refused the credentials"), "{err}");
    assert!(!err.contains("unknown-secret-2f9c"), "{err}");

    let powerless = with_keys(&id, &secret);
    let (code, _, err) = loom_query_with(&["--snapshot", "s3://locked/x", "--list"], &powerless);
    assert_eq!(code, 1);
    assert!(err.contains("access denied"), "{err}");
    assert!(!err.contains(&secret), "{err}");

    let mut loom = session_at("s3://locked/live", &powerless);
    let answer = query(&mut loom, "SELECT count(*) AS n FROM ds_shop_orders_1");
    assert!(answer.to_string().contains("4000"), "{answer}");
    eventually("the refusal is logged", || {
        loom.stderr_text().contains("access denied")
    });
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    assert!(!loom.stderr_text().contains(&secret));
}
