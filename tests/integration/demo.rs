//! `loom demo` runs to completion offline and tells the whole story.

use std::process::Command;

#[test]
fn the_demo_runs_to_completion() {
    let keep = tempfile::tempdir().expect("dir");
    let snapshots = tempfile::tempdir().expect("dir");
    let out = Command::new(env!("CARGO_BIN_EXE_loom"))
        .args(["demo", "--keep"])
        .arg(keep.path())
        .arg("--snapshot")
        .arg(snapshots.path())
        .output()
        .expect("run loom demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for needle in [
        "crm_ping → \"pong\"",
        "envelope",
        "join hint: ds_shop_list_orders_1.customer_id ↔ ds_crm_search_customers_1.customer_id",
        "country",
        "ds_view_revenue_by_plan",
        "re-opens it",
        "| refunded |",
        "Done.",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    let exported = std::fs::read_to_string(keep.path().join("ds_view_revenue_by_plan.csv"))
        .expect("kept export");
    assert!(
        exported.starts_with("plan,orders,revenue\r\n"),
        "{exported}"
    );
    assert_eq!(exported.lines().count(), 4);
}

#[test]
fn an_unknown_demo_server_kind_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_loom"))
        .args(["demo-server", "bank"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected `crm` or `shop`"));
}
