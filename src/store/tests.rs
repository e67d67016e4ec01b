use super::*;
use crate::ingest::ingest_json_array;

fn provenance() -> Provenance {
    Provenance {
        server: "s".into(),
        tool: "t".into(),
        args: serde_json::json!({}),
        created_at: "2026-01-01T00:00:00Z".into(),
        source: "test".into(),
    }
}

fn add_rows(store: &Store, server: &str, tool: &str, text: &str) -> Arc<Dataset> {
    try_add_rows(store, server, tool, text).expect("add")
}

/// What the store answers to holding the rows of `text`.
fn try_add_rows(
    store: &Store,
    server: &str,
    tool: &str,
    text: &str,
) -> Result<Arc<Dataset>, String> {
    store.add(rows_dataset(server, tool, text, false))
}

/// The rows of `text` as a new dataset of `server`/`tool`.
fn rows_dataset(server: &str, tool: &str, text: &str, passed_through: bool) -> NewDataset {
    let ingested = ingest_json_array(text).expect("ingest");
    NewDataset {
        server: server.into(),
        tool: tool.into(),
        schema: ingested.batch.schema(),
        batches: vec![ingested.batch],
        columns: ingested.columns,
        provenance: provenance(),
        pinned: false,
        implicit: false,
        passed_through,
        name: None,
    }
}

/// A store with room for `halves` halves of `rows(100)` held as one dataset.
fn budgeted(halves: usize) -> Store {
    let one = add_rows(
        &Store::new(StoreSettings::default()).expect("probe"),
        "s",
        "t",
        &rows(100),
    )
    .bytes;
    Store::new(StoreSettings {
        memory_budget_bytes: (one * halves / 2) as u64,
        ..StoreSettings::default()
    })
    .expect("store")
}

fn rows(n: usize) -> String {
    let items: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id": {i}, "name": "user-{i}", "score": {}.5}}"#,
                i % 10
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

#[tokio::test]
async fn refs_are_named_after_server_and_tool_and_numbered() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let a = add_rows(&store, "GitHub", "list-issues", &rows(3));
    let b = add_rows(&store, "GitHub", "list-issues", &rows(3));
    assert_eq!(a.reference, "ds_github_list_issues_1");
    assert_eq!(b.reference, "ds_github_list_issues_2");
    let out = store
        .query("SELECT count(*) AS n, sum(id) AS s FROM ds_github_list_issues_2")
        .await
        .expect("query");
    assert_eq!(out.rows, 1);
}

#[tokio::test]
async fn the_self_test_refuses_everything_forbidden() {
    let store = Store::new(StoreSettings::default()).expect("store");
    store.self_test().await.expect("sealed");
    add_rows(&store, "s", "t", &rows(3));
    // With a dataset held, each is still stopped by what must stop it.
    store.self_test().await.expect("sealed with a dataset");
    for (sql, must_say) in Store::FORBIDDEN {
        let error = store.query(sql).await.expect_err(sql);
        assert!(error.to_string().contains(must_say), "{sql}: {error}");
    }
}

#[tokio::test]
async fn refusals_name_the_reason() {
    let store = Store::new(StoreSettings::default()).expect("store");
    add_rows(&store, "s", "t", &rows(3));
    let cases = [
        ("SELECT * FROM range(10)", "not a loom dataset"),
        ("COPY (SELECT 1) TO '/tmp/x.csv'", "read-only"),
        (
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
            "read-only",
        ),
        ("SELECT repeat('a', 300000000)", "repeat"),
        ("SELECT repeat(name, id) FROM ds_s_t_1", "literal"),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            "recursive",
        ),
    ];
    for (sql, needle) in cases {
        let error = store.query(sql).await.expect_err(sql).to_string();
        assert!(error.contains(needle), "{sql}: {error}");
    }
    let ok = store.query("SELECT repeat(name, 2) FROM ds_s_t_1").await;
    assert!(ok.is_ok(), "{ok:?}");
}

fn add_passed_through(store: &Store, text: &str) -> Result<Arc<Dataset>, String> {
    store.add(rows_dataset("s", "small", text, true))
}

/// The table of a result the client holds whole never evicts a dataset the client reaches only
/// through loom; it takes room from other such tables, or is not kept (SPEC §8.4, §10.2).
#[tokio::test]
async fn a_passed_through_table_evicts_only_its_own_kind() {
    let store = budgeted(5);
    let envelope = add_rows(&store, "s", "t", &rows(100));
    let small = add_passed_through(&store, &rows(100)).expect("room for one");
    // Another passed-through table takes the first one's room, never the envelope's.
    let newer = add_passed_through(&store, &rows(100)).expect("room from its own kind");
    assert_eq!(
        store.references(),
        vec![envelope.reference.clone(), newer.reference.clone()]
    );
    assert!(store.was_evicted(&small.reference));
    // With a second envelope's dataset there is no room left that is its own kind's to take.
    let second = add_rows(&store, "s", "t", &rows(100));
    let refused = add_passed_through(&store, &rows(100)).expect_err("no room");
    assert!(refused.contains("would evict other datasets"), "{refused}");
    let held = store.references();
    assert!(
        held.contains(&envelope.reference) && held.contains(&second.reference),
        "{held:?}"
    );
    // The keeper lets a table go as if evicted: loom_describe says so.
    store.let_go(&second.reference);
    assert!(store.was_evicted(&second.reference));
}

#[tokio::test]
async fn eviction_drops_least_recently_used_but_never_pinned_or_new() {
    let store = budgeted(3);
    let first = add_rows(&store, "s", "t", &rows(100));
    let second = add_rows(&store, "s", "t", &rows(100));
    // Room for one and a half: only the newest survives.
    assert_eq!(store.references(), vec![second.reference.clone()]);
    assert!(store.was_evicted(&first.reference));
    let error = store
        .query(&format!("SELECT * FROM {}", first.reference))
        .await
        .expect_err("evicted");
    assert!(error.to_string().contains(&first.reference), "{error}");
}

#[test]
fn min_and_max_compare_typed_values() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(
        &store,
        "s",
        "mm",
        r#"[{"big": 5, "at": "2024-01-01T00:00:00.500000Z"},
            {"big": 123456789012345678901, "at": "2024-01-01T00:00:00Z"},
            {"big": -123456789012345678901, "at": "2024-01-01T00:00:01Z"}]"#,
    );
    let big = &d.profile()[0];
    assert_eq!(big.min, Some(serde_json::json!("-123456789012345678901")));
    assert_eq!(big.max, Some(serde_json::json!("123456789012345678901")));
    let at = &d.profile()[1];
    assert_eq!(at.min, Some(serde_json::json!("2024-01-01T00:00:00Z")));
    assert_eq!(at.max, Some(serde_json::json!("2024-01-01T00:00:01Z")));
}

#[test]
fn automatic_refs_never_take_a_chosen_name() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let ingested = ingest_json_array(&rows(2)).expect("ingest");
    store
        .add(NewDataset {
            server: "view".into(),
            tool: "x".into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: provenance(),
            pinned: true,
            implicit: false,
            passed_through: false,
            name: Some("ds_view_x_1".into()),
        })
        .expect("view");
    let auto = add_rows(&store, "view", "x", &rows(2));
    assert_eq!(auto.reference, "ds_view_x_2");
}

/// A CTE chain that joins each level to itself is O(k) SQL and O(2^k) plan: refused before
/// planning, in no time and no memory (issue 12: 28 levels ran 65 s and took 17.5 GB).
#[tokio::test]
async fn cte_plan_bombs_are_refused_before_planning() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(&store, "s", "t", &rows(842));
    let chain = |levels: usize| {
        let mut sql = format!("WITH l0 AS (SELECT id FROM {})", d.reference);
        for k in 1..=levels {
            sql.push_str(&format!(
                ", l{k} AS (SELECT a.id FROM l{} a JOIN l{} b ON a.id = b.id)",
                k - 1,
                k - 1
            ));
        }
        sql.push_str(&format!(" SELECT count(*) AS n FROM l{levels}"));
        sql
    };
    let out = store.query(&chain(6)).await.expect("a modest chain runs");
    assert_eq!(out.rows, 1);
    for levels in [12, 28, 200] {
        // The refusal comes from the statement check: were it planned first, 28 levels would
        // not come back at all (minutes, gigabytes).
        match guard::check_statement(&chain(levels)) {
            Err(Refusal(why)) => assert!(why.contains("once its CTEs are expanded"), "{why}"),
            Ok(()) => panic!("{levels} levels passed the statement check"),
        }
        assert!(matches!(
            store.query(&chain(levels)).await,
            Err(QueryError::Refused(_))
        ));
    }
    // A long chain that uses each level once is fine.
    let mut linear = format!("WITH l0 AS (SELECT id FROM {})", d.reference);
    for k in 1..=40 {
        linear.push_str(&format!(
            ", l{k} AS (SELECT id FROM l{} WHERE id > {k})",
            k - 1
        ));
    }
    linear.push_str(" SELECT count(*) AS n FROM l40");
    assert!(store.query(&linear).await.is_ok());
}

#[tokio::test]
async fn oversized_sql_is_refused_before_parsing() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let values: Vec<String> = (0..20_000).map(|i| format!("({i})")).collect();
    let sql = format!("SELECT count(*) FROM (VALUES {}) AS v(x)", values.join(","));
    match store.query(&sql).await {
        Err(QueryError::Refused(Refusal(why))) => assert!(why.contains("bytes long"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// Functions that build large values are bounded by the bytes they would build, measured from
/// their actual arguments at run time — also where the optimizer folds a constant call (issue
/// 12: `repeat('<20,000 characters>', 100000)` took loom to 24 GB and the OOM killer).
#[tokio::test]
async fn value_building_functions_are_bounded_by_bytes() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(&store, "s", "t", &rows(20_000));
    for name in [
        "repeat",
        "lpad",
        "rpad",
        "array_repeat",
        "array_resize",
        "list_resize",
        "range",
        "generate_series",
        "replace",
        "regexp_replace",
        "concat",
        "encode",
        "array_to_string",
        "array_join",
        "list_join",
    ] {
        assert!(
            bounded::is_bounded(&store.ctx, name),
            "{name} is not bounded"
        );
    }
    let literal = "x".repeat(20_000);
    let refused = [
        // One value of 2 GB, folded at planning time.
        format!("SELECT length(repeat('{literal}', 100000)) AS n"),
        // 100 kB per row is fine alone; 20,000 rows of it at once are not.
        format!(
            "SELECT max(length(repeat(name, 100000))) AS n FROM {}",
            d.reference
        ),
        // Every character of a column replaced by a long literal.
        format!("SELECT max(length(replace(repeat('a', 1000), 'a', '{literal}'))) AS n"),
        format!(
            "SELECT max(length(regexp_replace(name, '', '{}', 'g'))) AS n FROM {}",
            "y".repeat(2000),
            d.reference
        ),
    ];
    for sql in &refused {
        match store.query(sql).await {
            Err(QueryError::Sql(why)) => assert!(
                why.contains("loom allows at most"),
                "{}: {why}",
                &sql[..60.min(sql.len())]
            ),
            other => panic!("{}: {other:?}", &sql[..60.min(sql.len())]),
        }
    }
    // A list searched for every element of another: count × count steps in one step.
    let r = &d.reference;
    let all_ids = format!("(SELECT array_agg(id) AS l FROM {r})");
    for function in ["array_has_all", "array_has_any"] {
        match store
            .query(&format!("SELECT {function}(l, l) AS b FROM {all_ids} s"))
            .await
        {
            Err(QueryError::Sql(why)) => assert!(
                why.contains("element counts of its two lists") && why.contains(function),
                "{function}: {why}"
            ),
            other => panic!("{function}: {other:?}"),
        }
    }
    // ... while short lists, and array_has_any against a constant list (a hash lookup), run.
    let out = store
        .query(&format!(
            "SELECT array_has_all(l, [1, 2]) AS a, array_has_any(l, [3]) AS b, \
             array_has_any([5], l) AS c FROM {all_ids} s"
        ))
        .await
        .expect("linear uses run");
    assert_eq!(out.rows, 1);
    // Ordinary uses are untouched.
    let out = store
        .query(&format!(
            "SELECT lpad(CAST(id AS VARCHAR), 6, '0') AS padded, repeat('-', 3) AS rule, \
             replace(name, 'user', 'u') AS short FROM {} ORDER BY id LIMIT 2",
            d.reference
        ))
        .await
        .expect("ordinary calls run");
    assert_eq!(out.rows, 2);
}

/// `memoryBudgetBytes` is a real bound: a dataset that alone (beside what pinned views hold)
/// exceeds it is refused, instead of evicting everything else and being kept anyway.
#[tokio::test]
async fn a_dataset_over_the_budget_alone_is_refused() {
    let store = Store::new(StoreSettings {
        memory_budget_bytes: 64 * 1024,
        ..StoreSettings::default()
    })
    .expect("store");
    let small = add_rows(&store, "s", "t", &rows(10));
    let why = try_add_rows(&store, "s", "big", &rows(5_000)).expect_err("over the budget");
    assert!(why.contains("memoryBudgetBytes is 65536"), "{why}");
    assert_eq!(
        store.references(),
        vec![small.reference.clone()],
        "nothing was evicted for it"
    );
}

/// A join that pairs every row with every row is refused when the inputs are too large for
/// that (by the engine's row counts), while key joins over the same data and small cross joins
/// run.
#[tokio::test]
async fn cross_joins_of_large_inputs_are_refused() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(&store, "s", "t", &rows(5_000));
    let r = &d.reference;
    for sql in [
        format!("SELECT count(*) FROM {r} a, {r} b, {r} c WHERE a.id + b.id + c.id = 7"),
        format!("SELECT sum(a.id * b.id) FROM {r} a CROSS JOIN {r} b CROSS JOIN {r} c"),
        format!("SELECT count(*) FROM {r} a JOIN {r} b ON a.id < b.id JOIN {r} c ON b.id < c.id"),
        format!("SELECT a.name, b.name FROM {r} a, {r} b, {r} c WHERE a.score > 1"),
    ] {
        match store.query(&sql).await {
            Err(QueryError::Refused(Refusal(why))) => {
                assert!(
                    why.contains("join without an equality condition"),
                    "{sql}: {why}"
                )
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    for sql in [
        format!("SELECT count(*) AS n FROM {r} a JOIN {r} b ON a.id = b.id"),
        format!("SELECT count(*) AS n FROM {r} a, {r} b WHERE a.id = b.id"),
        format!("SELECT sum(a.id * b.id) AS n FROM {r} a, (SELECT * FROM {r} LIMIT 10) b"),
        // Answered from the row counts alone, without pairing anything.
        format!("SELECT count(*) AS n FROM {r} a, {r} b, {r} c"),
    ] {
        let out = store
            .query(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(out.rows, 1, "{sql}");
    }
}

/// Holes a review of the bounded engine found (each crashed or exhausted the process, or made
/// it plan for gigabytes); all closed.
#[tokio::test]
async fn holes_found_in_review_are_closed() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(&store, "s", "t", &rows(100));
    let r = &d.reference;
    let bounded = |e: &QueryError| e.to_string().contains("loom allows at most");
    let refused = |e: &QueryError, words: &str| matches!(e, QueryError::Refused(Refusal(why)) if why.contains(words));

    // Deep expressions overflowed the engine thread's stack while planning (250 `+` terms).
    let terms = vec!["1"; 300].join("+");
    let out = store
        .query(&format!("SELECT {terms} AS n"))
        .await
        .expect("300 terms");
    assert_eq!(out.rows, 1);
    let ors: Vec<String> = (0..600).map(|i| format!("id = {i}")).collect();
    let e = store
        .query(&format!(
            "SELECT count(*) FROM {r} WHERE {}",
            ors.join(" OR ")
        ))
        .await
        .expect_err("600 nested ORs");
    assert!(refused(&e, "expressions nest"), "{e}");
    let joins: Vec<String> = (1..100)
        .map(|i| format!("JOIN {r} u{i} ON u{i}.id = u0.id"))
        .collect();
    let out = store
        .query(&format!(
            "SELECT count(*) AS n FROM {r} u0 {}",
            joins.join(" ")
        ))
        .await
        .expect("a 100-way key join plans on the engine's stack");
    assert_eq!(out.rows, 1);

    // A name defined again in a sibling subquery hid the first chain's doubling.
    let chain = |k: usize, doubling: bool| {
        let mut sql = "WITH c0 AS (SELECT 1 AS x)".to_string();
        for i in 1..=k {
            if doubling {
                sql.push_str(&format!(
                    ", c{i} AS (SELECT p.x FROM c{} p JOIN c{} q ON p.x = q.x)",
                    i - 1,
                    i - 1
                ));
            } else {
                sql.push_str(&format!(", c{i} AS (SELECT 1 AS x)"));
            }
        }
        format!("{sql} SELECT count(*) AS n FROM c{k}")
    };
    let sibling = format!(
        "SELECT * FROM ({}) t, ({}) s",
        chain(16, true),
        chain(16, false)
    );
    assert!(matches!(
        guard::check_statement(&sibling),
        Err(Refusal(why)) if why.contains("once its CTEs are expanded")
    ));

    // Quoted or backquoted references resolve to the CTE as DataFusion resolves them.
    let mut quoted = "WITH c0 AS (SELECT 1 AS x)".to_string();
    for i in 1..=16 {
        quoted.push_str(&format!(
            ", c{i} AS (SELECT p.x FROM `c{0}` p JOIN \"c{0}\" q ON p.x = q.x)",
            i - 1
        ));
    }
    quoted.push_str(" SELECT count(*) AS n FROM `c16`");
    assert!(
        matches!(
            guard::check_statement(&quoted),
            Err(Refusal(why)) if why.contains("once its CTEs are expanded")
        ),
        "{quoted}"
    );
    // A UNION ALL of constants copied into every reference of its CTE.
    let legs = vec!["SELECT 1 AS x"; 230].join(" UNION ALL ");
    let copies = vec!["SELECT * FROM c"; 40].join(" UNION ALL ");
    assert!(matches!(
        guard::check_statement(&format!("WITH c AS ({legs}) SELECT count(*) FROM ({copies}) t")),
        Err(Refusal(why)) if why.contains("SELECTs") || why.contains("once its CTEs are expanded")
    ));

    // A CTE with a large body counted as one table reference.
    let body = vec!["SELECT 1 AS x"; 500].join(" UNION ALL ");
    let uses = vec!["SELECT x FROM c0"; 400].join(" UNION ALL ");
    let big = format!("WITH c0 AS ({body}) SELECT count(*) FROM ({uses}) t");
    assert!(matches!(
        guard::check_statement(&big),
        Err(Refusal(why)) if why.contains("once its CTEs are expanded")
    ));

    // Doubling a value at every CTE level with `||`, concat or array_concat.
    for double in ["x || x", "concat(x, x)"] {
        let mut sql = format!("WITH c0 AS (SELECT name AS x FROM {r})");
        for i in 1..=32 {
            sql.push_str(&format!(", c{i} AS (SELECT {double} AS x FROM c{})", i - 1));
        }
        sql.push_str(" SELECT length(x) AS n FROM c32 LIMIT 1");
        let e = store.query(&sql).await.expect_err(double);
        assert!(bounded(&e), "{double}: {e}");
    }
    let mut sql = format!("WITH c0 AS (SELECT make_array(id) AS x FROM {r})");
    for i in 1..=30 {
        sql.push_str(&format!(
            ", c{i} AS (SELECT array_concat(x, x) AS x FROM c{})",
            i - 1
        ));
    }
    sql.push_str(" SELECT cardinality(x) AS n FROM c30 LIMIT 1");
    let e = store.query(&sql).await.expect_err("array_concat doubling");
    assert!(bounded(&e), "{e}");
    // `||` keeps its meaning: NULL on either side is NULL.
    let out = store
        .query("SELECT 'a' || CAST(NULL AS VARCHAR) AS n, 'a' || 'b' AS m")
        .await
        .expect("||");
    assert_eq!(
        values::cell(out.batches[0].column(0), 0),
        serde_json::Value::Null
    );
    assert_eq!(
        values::cell(out.batches[0].column(1), 0),
        serde_json::json!("ab")
    );

    // A folded constant copied into every row of every batch.
    let e = store
        .query(&format!(
            "SELECT max(length(v)) FROM (SELECT repeat('0123456789', 100000) AS v FROM {r} a JOIN {r} b ON true) t"
        ))
        .await
        .expect_err("broadcast constant");
    assert!(bounded(&e), "{e}");

    // List elements were counted at 16 bytes.
    let e = store
        .query(
            "WITH c AS (SELECT range(1000) AS r) SELECT cardinality(array_repeat(r, 65000)) FROM c",
        )
        .await
        .expect_err("array_repeat of a list");
    assert!(bounded(&e), "{e}");
}

/// `||` is bounded wherever it is written: a projection, a filter, a join condition.
#[tokio::test]
async fn string_concatenation_is_bounded_in_every_clause() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(&store, "s", "t", &rows(50));
    let r = &d.reference;
    let plan = store
        .plan_checked(&format!(
            "SELECT a.name || b.name AS x FROM {r} a JOIN {r} b ON a.name || 'x' = b.name || 'x' \
             WHERE a.name || b.name <> ''"
        ))
        .await
        .expect("plan");
    let optimized = store.ctx.state().optimize(&plan).expect("optimize");
    let shown = optimized.display_indent().to_string();
    assert!(!shown.contains(" || "), "an unbounded || is left: {shown}");
    assert!(shown.contains(bounded::STRING_CONCAT), "{shown}");
}

/// A crashed loom's spill directory is removed at the next start; a live process's, and
/// anything not named like one, stay.
#[test]
fn stale_spill_directories_are_removed_and_live_ones_kept() {
    let temp = tempfile::tempdir().expect("dir");
    // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
    let dead = temp.path().join("loom-spill-4294967-abc");
    let live = temp
        .path()
        .join(format!("loom-spill-{}-abc", std::process::id()));
    let other = temp.path().join("loom-spill-notapid");
    for dir in [&dead, &live, &other] {
        std::fs::create_dir_all(dir.join("inner")).expect("mkdir");
    }
    assert_eq!(super::remove_stale_spills(temp.path()), 1);
    assert!(!dead.exists());
    assert!(live.exists() && other.exists());
}

/// Pinned views and documents hold at most half of `memoryBudgetBytes`: past that, pinning is
/// refused with the share and what holds it, and the other half stays free for the results the
/// firewall intercepts (views filling the budget made the next large result pass through raw).
#[test]
fn pinning_holds_at_most_half_of_the_budget() {
    let store = budgeted(9);
    let view = |name: &str| {
        let ingested = ingest_json_array(&rows(100)).expect("ingest");
        store.add(NewDataset {
            server: "view".into(),
            tool: name.into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: provenance(),
            pinned: true,
            implicit: false,
            passed_through: false,
            name: Some(format!("ds_view_{name}")),
        })
    };
    view("a").expect("first view");
    view("b").expect("second view");
    let why = view("c").expect_err("past the share");
    assert!(why.contains("pinning `ds_view_c`"), "{why}");
    assert!(why.contains("at most half of memoryBudgetBytes"), "{why}");
    assert!(
        why.contains("ds_view_a ("),
        "names what holds the share: {why}"
    );
    // Results still find room: two of them fit beside the views, older ones are evicted.
    for _ in 0..4 {
        add_rows(&store, "s", "t", &rows(100));
    }
    assert_eq!(store.references().len(), 4, "{:?}", store.references());
    // pin() of an unpinned dataset answers the same way.
    let last = store.references().pop().expect("a result");
    let why = store.pin(&last).expect_err("past the share");
    assert!(why.contains(&format!("pinning `{last}`")), "{why}");
}
