use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};

use super::*;
use crate::config::ClusterConfig;
use crate::store::StoreSettings;

const SECRET: &str = "0123456789abcdef0123456789abcdef";

fn config(dir: &std::path::Path, secret: &str) -> ClusterConfig {
    ClusterConfig {
        store: dir.display().to_string(),
        secret: secret.to_string(),
        advertise: None,
    }
}

fn rows(n: i64) -> NewDataset {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (1..=n).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("name {i}")).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .expect("batch");
    NewDataset {
        server: "crm".into(),
        tool: "rows".into(),
        batches: vec![batch],
        schema,
        columns: Vec::new(),
        provenance: Provenance {
            server: "crm".into(),
            tool: "rows".into(),
            args: serde_json::json!({"limit": n}),
            created_at: crate::common::text::now_rfc3339(),
            source: "structuredContent".into(),
        },
        pinned: false,
        implicit: false,
        passed_through: false,
        name: None,
    }
}

/// One instance's session: its own store (own engine) in the cluster.
async fn join(cluster: &Arc<Cluster>, credential: &str) -> (Arc<Store>, Arc<Membership>) {
    let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
    let member = Membership::join(cluster.clone(), credential, &store).await;
    let listening = member.clone();
    store.listen(Box::new(move |d| listening.dataset_created(d)));
    let removing = member.clone();
    store.listen_for_removals(Box::new(move |r| removing.dataset_removed(r)));
    (store, member)
}

async fn count(store: &Store, sql: &str) -> i64 {
    let out = store.query(sql).await.expect("query");
    out.batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("count")
        .value(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_minted_on_one_instance_is_answered_by_another() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Cluster::open(&config(dir.path(), SECRET)).await.expect("a");
    let b = Cluster::open(&config(dir.path(), SECRET)).await.expect("b");
    let (store_a, member_a) = join(&a, "alice").await;
    let (store_b, member_b) = join(&b, "alice").await;
    let minted = store_a.add(rows(10_000)).expect("add");
    member_a.settled().await;
    // The second session of the scope numbers from its own block: never the same ref.
    assert_eq!(minted.reference, "ds_crm_rows_1");
    let other = store_b.add(rows(3)).expect("add");
    assert_eq!(other.reference, "ds_crm_rows_1001");
    member_b.settled().await;

    let sql = "SELECT count(*) FROM ds_crm_rows_1 a JOIN ds_crm_rows_1001 b ON a.id = b.id";
    member_b.open_named(&store_b, sql).await.expect("open");
    assert_eq!(count(&store_b, sql).await, 3);
    let opened = store_b.get("ds_crm_rows_1").expect("opened");
    assert_eq!(opened.rows, 10_000);
    // Its statistics, computed when first asked for, are those of the dataset where it was made
    // (the same values, the same join-hint hashes).
    assert_eq!(opened.profile(), minted.profile());
    assert_eq!(opened.provenance.args, serde_json::json!({"limit": 10_000}));
    // Opened, not minted: it is not written again.
    assert_eq!(
        member_b.others(&store_b).await.expect("list").len(),
        0,
        "both datasets are held by b now"
    );
    let listed = member_a.others(&store_a).await.expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|e| e.reference.as_str())
            .collect::<Vec<_>>(),
        ["ds_crm_rows_1001"]
    );
    assert_eq!(listed[0].rows, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataset_taken_back_before_an_answer_named_it_leaves_the_store() {
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let (store, member) = join(&cluster, "alice").await;
    let kept = store.add(rows(4)).expect("add");
    let undone = store.add(rows(9)).expect("add");
    // As the intercept does when its envelope is not smaller: taken back at once.
    store.remove(&undone.reference);
    member.settled().await;
    let (other, other_member) = join(&cluster, "alice").await;
    let listed: Vec<String> = other_member
        .others(&other)
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.reference)
        .collect();
    assert_eq!(listed, std::slice::from_ref(&kept.reference));
    assert!(
        !other_member
            .open(&other, &undone.reference)
            .await
            .expect("open")
    );
    let files: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&undone.reference))
        .collect();
    assert!(files.is_empty(), "{files:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_and_blobs_open_on_another_instance_byte_for_byte() {
    use crate::store::document::{Content, DocumentKind};
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let (store_a, member_a) = join(&cluster, "alice").await;
    let provenance = || Provenance {
        server: "web".into(),
        tool: "fetch".into(),
        args: serde_json::json!({"url": "https://example.com/"}),
        created_at: "2026-12-06T00:00:00.000Z".into(),
        source: "html".into(),
    };
    // Lines that end in \n, an empty line, a last line without one, a character past the BMP.
    let original = "<h1>Title</h1>\n\nsecond line é 🦀\r\n  indented\nlast".to_string();
    let doc = store_a
        .add_document(DocumentKind::Page, original.clone(), provenance())
        .expect("document");
    let trailing = store_a
        .add_document(DocumentKind::Json, "{\"a\": 1}\n".into(), provenance())
        .expect("document");
    let blob = store_a
        .add_blob(
            "image/png",
            vec![0x89, b'P', b'N', b'G', 0, 255],
            provenance(),
        )
        .expect("blob");
    member_a.settled().await;

    let (store_b, member_b) = join(&cluster, "alice").await;
    for (reference, text, kind) in [
        (&doc.reference, original.as_str(), DocumentKind::Page),
        (&trailing.reference, "{\"a\": 1}\n", DocumentKind::Json),
    ] {
        assert!(member_b.open(&store_b, reference).await.expect("open"));
        let opened = store_b.get(reference).expect("held");
        let Content::Document(document) = &opened.content else {
            panic!("{reference} opened as {}", opened.content.kind());
        };
        assert_eq!(document.text(), text);
        assert_eq!(document.kind, kind);
    }
    assert!(
        member_b
            .open(&store_b, &blob.reference)
            .await
            .expect("open")
    );
    let opened = store_b.get(&blob.reference).expect("held");
    let Content::Blob(found) = &opened.content else {
        panic!("the blob opened as {}", opened.content.kind());
    };
    assert_eq!(found.mime, "image/png");
    assert_eq!(found.bytes.as_slice(), [0x89, b'P', b'N', b'G', 0, 255]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_credential_never_sees_a_scope() {
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let (alice, member_alice) = join(&cluster, "alice").await;
    let (bob, member_bob) = join(&cluster, "bob").await;
    alice.add(rows(5)).expect("add");
    member_alice.settled().await;
    // Bob's first ref is numbered as if alice had none: scopes are apart.
    assert_eq!(bob.add(rows(2)).expect("add").reference, "ds_crm_rows_1");
    member_bob.settled().await;
    assert!(
        !member_bob
            .open(&bob, "ds_crm_rows_2")
            .await
            .expect("lookup")
    );
    let bobs = member_bob.others(&bob).await.expect("list");
    assert!(bobs.is_empty(), "{bobs:?}");
    // The folder names no credential.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.contains("alice") && !n.contains("bob")),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_secret_or_a_newer_layout_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("dir");
    Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("first");
    let error = Cluster::open(&config(dir.path(), &SECRET.replace('0', "9")))
        .await
        .expect_err("another secret");
    assert!(error.starts_with("cluster.secret differs"), "{error}");

    let newer = tempfile::tempdir().expect("dir");
    std::fs::write(
        newer.path().join("cluster.json"),
        r#"{"layout": 7, "loomVersion": "9.0.0", "secretCheck": "x"}"#,
    )
    .expect("write");
    let error = Cluster::open(&config(newer.path(), SECRET))
        .await
        .expect_err("newer");
    assert!(
        error.contains("loom 9.0.0 (layout 7)") && error.contains("upgrade"),
        "{error}"
    );

    // A dataset entry from a newer loom is refused with its version, the session goes on.
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let (store, member) = join(&cluster, "alice").await;
    store.add(rows(4)).expect("add");
    member.settled().await;
    let scope = cluster.scope("alice");
    let entry = dir.path().join(&scope).join("refs/ds_crm_rows_1.json");
    let text = std::fs::read_to_string(&entry).expect("entry");
    std::fs::write(&entry, text.replace("\"layout\": 1", "\"layout\": 3")).expect("write");
    let (other, other_member) = join(&cluster, "alice").await;
    let error = other_member
        .open(&other, "ds_crm_rows_1")
        .await
        .expect_err("newer entry");
    assert!(
        error.contains("cluster layout 3") && error.contains("upgrade"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_and_chosen_names_are_claimed_once() {
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let scope = cluster.scope("alice");
    let claims = futures::future::join_all((0..6).map(|_| cluster.claim_block(&scope))).await;
    let mut blocks: Vec<u32> = claims.into_iter().map(|c| c.expect("claim")).collect();
    blocks.sort_unstable();
    assert_eq!(blocks, [0, 1, 2, 3, 4, 5]);
    let (_, member) = join(&cluster, "alice").await;
    member.claim_name("ds_view_top").await.expect("first");
    // The same session may name it again (materialize's replace); another may not.
    member.claim_name("ds_view_top").await.expect("own claim");
    let (_, other) = join(&cluster, "alice").await;
    let error = other
        .claim_name("ds_view_top")
        .await
        .expect_err("another session");
    assert!(error.contains("already exists"), "{error}");

    // A numbered ref that reads like a view's (a server named `view`) takes the claim too: a
    // view of that name in another session is refused instead of replacing its data.
    let (store, minting) = join(&cluster, "alice").await;
    let mut new = rows(5);
    new.server = "view".into();
    new.tool = "rows".into();
    let minted = store.add(new).expect("add");
    minting.settled().await;
    assert!(
        minted.reference.starts_with("ds_view_rows_"),
        "{}",
        minted.reference
    );
    let error = other
        .claim_name(&minted.reference)
        .await
        .expect_err("taken by the numbered ref");
    assert!(error.contains("already exists"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_is_named_and_local_datasets_keep_working() {
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    let (store, member) = join(&cluster, "alice").await;
    // The scope's folder becomes a file: every write under it fails.
    let scope = dir.path().join(cluster.scope("alice"));
    std::fs::remove_dir_all(&scope).expect("remove");
    std::fs::write(&scope, b"not a folder").expect("write");
    let held = store.add(rows(7)).expect("add");
    member.settled().await;
    assert_eq!(
        count(&store, &format!("SELECT count(*) FROM {}", held.reference)).await,
        7
    );
    // The failed write was reported (a warning naming the store, once per kind).
    assert!(!cluster.warned.lock().expect("lock").is_empty());

    // A session that begins while the store cannot be written is not refused: its refs are
    // numbered past every block the store hands out (none shadows a ref of the store), and its
    // datasets stay with it.
    let (store, member) = join(&cluster, "alice").await;
    let held = store.add(rows(3)).expect("add");
    member.settled().await;
    let number: u64 = held
        .reference
        .rsplit('_')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("numbered");
    assert!(
        number > u64::from(MAX_BLOCKS) * u64::from(BLOCK),
        "{}",
        held.reference
    );
    assert_eq!(
        count(&store, &format!("SELECT count(*) FROM {}", held.reference)).await,
        3
    );
    // Once the store is back, what other sessions wrote opens again; this one's never went.
    std::fs::remove_file(&scope).expect("remove");
    let (other, other_member) = join(&cluster, "alice").await;
    assert!(
        !other_member
            .open(&other, &held.reference)
            .await
            .expect("open")
    );
}

#[test]
fn ref_words_are_the_refs_a_statement_names() {
    assert_eq!(
        ref_words(
            "SELECT * FROM ds_a_1 JOIN \"ds_b_2\" USING (id) -- ds_c_3\n WHERE x = 'ds_d_4' AND doc_5.y"
        ),
        ["ds_a_1", "ds_b_2", "doc_5"]
    );
    assert!(ref_words("SELECT ds_ FROM t").is_empty());
    // Columns and aliases that only begin like refs are not looked up in the store.
    assert_eq!(
        ref_words("SELECT doc_id, blob_url, ds_name, ds_a FROM ds_view_top t JOIN blob_7 b"),
        ["ds_view_top", "blob_7"]
    );
    // Hostile statements: past the engine's limit nothing is looked at; below it the words
    // are capped (and found in linear time).
    let huge = "SELECT ds_x_1 ".repeat(10_000);
    assert!(ref_words(&huge).is_empty());
    let many: String = (0..5_000).map(|n| format!("ds_a_{n} ")).collect();
    assert!(many.len() < 64 * 1024, "{}", many.len());
    assert_eq!(ref_words(&many).len(), MAX_WORDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_state_opens_on_every_instance_of_the_secret_and_nowhere_else() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Cluster::open(&config(dir.path(), SECRET)).await.expect("a");
    let b = Cluster::open(&config(dir.path(), SECRET)).await.expect("b");
    assert_ne!(a.instance(), b.instance());
    let call = handoff::call_digest(
        "tools/call",
        "py_survey",
        Some(&serde_json::json!({"x": 1})),
    );
    let ten = std::time::Duration::from_secs(600);
    let state = a.seal_state("scope=s", &call, ten).expect("sealed");
    assert!(handoff::looks_sealed(&state));
    let opened = b.open_state(&state).expect("b opens a's state");
    assert_eq!(opened.instance, a.instance());
    assert_eq!(
        (opened.scope.as_str(), opened.call.as_str()),
        ("scope=s", call.as_str())
    );
    assert!(!opened.expired());
    // Two seals of one call differ (a key and a nonce of their own).
    let other = a.seal_state("scope=s", &call, ten).expect("sealed");
    assert_ne!(state, other);
    assert_ne!(a.open_state(&other).expect("opens").key, opened.key);
    // Any altered character, a cut, or another secret: nothing opens.
    for at in [7, state.len() / 2, state.len() - 1] {
        let mut bytes = state.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).expect("ascii");
        assert!(b.open_state(&altered).is_none(), "altered at {at} opened");
    }
    assert!(b.open_state(&state[..state.len() - 4]).is_none());
    assert!(b.open_state("loom1.").is_none());
    let elsewhere = tempfile::tempdir().expect("dir");
    let stranger = Cluster::open(&config(
        elsewhere.path(),
        "another secret of thirty-two bytes!",
    ))
    .await
    .expect("stranger");
    assert!(stranger.open_state(&state).is_none());
    // A lifetime of zero seconds is over once a second has passed.
    let brief = a
        .seal_state("scope=s", &call, std::time::Duration::ZERO)
        .expect("sealed");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(a.open_state(&brief).expect("opens").expired());
}

#[test]
fn a_call_is_named_by_its_arguments_in_any_member_order() {
    let one = serde_json::json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}});
    let two: serde_json::Value =
        serde_json::from_str(r#"{"b": {"c": [1, {"e": 3, "d": 2}]}, "a": 1}"#).expect("json");
    let digest = |v: &serde_json::Value| handoff::call_digest("tools/call", "t", Some(v));
    assert_eq!(digest(&one), digest(&two));
    assert_ne!(digest(&one), digest(&serde_json::json!({"a": 2})));
    assert_ne!(
        handoff::call_digest("tools/call", "t", None),
        handoff::call_digest("prompts/get", "t", None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_is_claimed_once_and_a_task_names_its_instance() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Cluster::open(&config(dir.path(), SECRET)).await.expect("a");
    let b = Cluster::open(&config(dir.path(), SECRET)).await.expect("b");
    assert!(a.claim_state("scope=s", "k1").await.expect("claim"));
    assert!(!b.claim_state("scope=s", "k1").await.expect("claim"));
    assert!(b.claim_state("scope=t", "k1").await.expect("another scope"));
    a.register("http://127.0.0.1:1/mcp")
        .await
        .expect("register");
    assert_eq!(
        b.instance_url(a.instance()).await.expect("read").as_deref(),
        Some("http://127.0.0.1:1/mcp")
    );
    assert_eq!(b.instance_url("not-an-id").await.expect("read"), None);
    a.record_task("scope=s", "ts-1").await.expect("record");
    assert_eq!(
        b.task_instance("scope=s", "ts-1")
            .await
            .expect("read")
            .as_deref(),
        Some(a.instance())
    );
    assert_eq!(
        b.task_instance("scope=t", "ts-1").await.expect("read"),
        None
    );
    a.unregister().await;
    let c = Cluster::open(&config(dir.path(), SECRET)).await.expect("c");
    assert_eq!(c.instance_url(a.instance()).await.expect("read"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_dataset_s_join_candidates_include_those_held_elsewhere_whose_names_may_join() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Cluster::open(&config(dir.path(), SECRET)).await.expect("a");
    let b = Cluster::open(&config(dir.path(), SECRET)).await.expect("b");
    let (store_a, member_a) = join(&a, "alice").await;
    let (store_b, member_b) = join(&b, "alice").await;
    store_b.join_from(member_b.join_source());
    store_a.add(rows(100)).expect("add");
    member_a.settled().await;
    // A dataset of another credential with the same columns is never a candidate.
    let (store_c, member_c) = join(&a, "carol").await;
    store_c.add(rows(7)).expect("add");
    member_c.settled().await;
    let new = store_b.add(rows(10)).expect("add");
    let blocking = store_b.clone();
    let candidates = tokio::task::spawn_blocking(move || {
        let new = blocking.get(&new.reference).expect("held");
        blocking
            .join_candidates(&[new.as_ref()])
            .into_iter()
            .map(|d| d.reference.clone())
            .collect::<Vec<_>>()
    })
    .await
    .expect("candidates");
    assert!(
        candidates.contains(&"ds_crm_rows_1".to_string()),
        "{candidates:?}"
    );
    assert_eq!(candidates.len(), 2, "{candidates:?}");
    assert_eq!(store_b.get("ds_crm_rows_1").expect("opened").rows, 100);
    let hints = crate::hints::hints_for(
        &store_b.get("ds_crm_rows_1001").expect("new"),
        &store_b.list(),
    );
    assert!(
        hints
            .iter()
            .any(|h| h.reference == "ds_crm_rows_1" && h.column == "name"),
        "{hints:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_headers_and_records_are_sealed_for_their_instance() {
    let dir = tempfile::tempdir().expect("dir");
    let a = Cluster::open(&config(dir.path(), SECRET)).await.expect("a");
    let b = Cluster::open(&config(dir.path(), SECRET)).await.expect("b");
    let token = a.forwarding_token(b.instance()).expect("token");
    assert!(b.forwarded_here(&token));
    // Meant for b: not for a (a process now at b's old address), nor altered, nor made up.
    assert!(!a.forwarded_here(&token));
    let mut altered = token.clone().into_bytes();
    altered[5] = if altered[5] == b'A' { b'B' } else { b'A' };
    assert!(!b.forwarded_here(&String::from_utf8(altered).expect("ascii")));
    assert!(!b.forwarded_here(b.instance()));
    // Records name their instance sealed: a record written without the secret is not read.
    a.record_task("scope=s", "t-1").await.expect("record");
    let tasks = dir.path().join("scope=s").join("tasks");
    let file = std::fs::read_dir(&tasks)
        .expect("tasks")
        .next()
        .expect("one")
        .expect("entry")
        .path();
    let sealed = std::fs::read(&file).expect("read");
    assert!(!String::from_utf8_lossy(&sealed).contains(a.instance()));
    std::fs::write(&file, format!("{{\"instance\":\"{}\"}}", b.instance())).expect("forge");
    assert_eq!(b.task_instance("scope=s", "t-1").await.expect("read"), None);
    // An instance entry written without the secret is refused by name.
    a.register("http://127.0.0.1:1/mcp")
        .await
        .expect("register");
    let entry = dir
        .path()
        .join("instances")
        .join(format!("{}.sealed", a.instance()));
    std::fs::write(&entry, br#"{"url":"http://evil.example/mcp"}"#).expect("forge");
    let c = Cluster::open(&config(dir.path(), SECRET)).await.expect("c");
    let refused = c.instance_url(a.instance()).await.expect_err("forged");
    assert!(refused.contains("not sealed"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_is_claimed_from_the_high_water_mark_and_a_lost_mark_costs_one_listing() {
    let dir = tempfile::tempdir().expect("dir");
    let cluster = Cluster::open(&config(dir.path(), SECRET))
        .await
        .expect("open");
    for expected in 0..3 {
        assert_eq!(
            cluster.claim_block("scope=s").await.expect("claim"),
            expected
        );
    }
    let blocks = dir.path().join("scope=s").join("blocks");
    assert_eq!(
        std::fs::read_to_string(blocks.join("high")).expect("mark"),
        "2"
    );
    // The mark lost (or far behind, written by a slower session): 40 blocks exist already.
    for b in 3..40 {
        std::fs::write(blocks.join(b.to_string()), "x").expect("block");
    }
    std::fs::remove_file(blocks.join("high")).expect("remove");
    assert_eq!(cluster.claim_block("scope=s").await.expect("claim"), 40);
    std::fs::write(blocks.join("high"), "5").expect("behind");
    assert_eq!(cluster.claim_block("scope=s").await.expect("claim"), 41);
    // A mark that does not read counts as none.
    std::fs::write(blocks.join("high"), "not a number").expect("garbage");
    assert_eq!(cluster.claim_block("scope=s").await.expect("claim"), 42);
}
