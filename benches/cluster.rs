//! Several instances, one store (issue 40, SPEC §25): the first `loom_query` on a dataset
//! another instance minted against the first one on a dataset minted here, 10k rows × 11
//! columns, the store a local directory.
//!
//! * `cluster/first_query_local_10k`: a store that has just taken the dataset in runs the query;
//! * `cluster/first_query_from_store_10k`: a fresh instance's store (its own engine, as another
//!   process would have) finds the ref in the SQL, reads its entry and Parquet file from the
//!   cluster's store, takes it in, then runs the same query;
//! * `cluster/publish_10k`: taking a dataset in with the cluster on, up to what an envelope
//!   waits for before it is answered (Parquet encode and the two writes);
//!   `cluster/add_10k_alone`: the same without a cluster.
//! * `cluster/join_lookup_first_100_entries` / `…_listed_100_entries`: what a new envelope's
//!   join hints wait for in a cluster when nothing held elsewhere may join it (a scope of 100
//!   entries): a fresh session's listing and 32 entry reads, or a listing made within 5 s.
//!
//! Only the query (and, for the second, the opening) is timed; making the stores is not.
//! Run: `cargo bench --bench cluster`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use loom::cluster::{Cluster, Membership};
use loom::config::ClusterConfig;
use loom::store::{Store, StoreSettings};

const SECRET: &str = "bench-cluster-secret-0123456789abcdef";

fn sql(reference: &str) -> String {
    format!(
        "SELECT country, plan, count(*) AS n, avg(score) AS s FROM {reference} \
         WHERE active GROUP BY country, plan ORDER BY n DESC"
    )
}

async fn member(cluster: &Arc<Cluster>, store: &Store) -> Arc<Membership> {
    let member = Membership::join(cluster.clone(), "bench", store).await;
    let listening = member.clone();
    store.listen(Box::new(move |d| listening.dataset_created(d)));
    member
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let config = ClusterConfig {
        store: dir.path().display().to_string(),
        secret: SECRET.into(),
        advertise: None,
    };
    let cluster = runtime.block_on(Cluster::open(&config)).expect("cluster");
    let text = common::user_rows(10_000).to_string();

    // The dataset another instance minted, in the store.
    let minting = Arc::new(Store::new(StoreSettings::default()).expect("store"));
    let minter = runtime.block_on(member(&cluster, &minting));
    let minted = common::hold(&minting, "rows", &text);
    runtime.block_on(minter.settled());
    let remote_sql = sql(&minted.reference);

    c.bench_function("cluster/first_query_local_10k", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Store::new(StoreSettings::default()).expect("store");
                let held = common::hold(&store, "rows", &text);
                let sql = sql(&held.reference);
                let started = Instant::now();
                runtime.block_on(store.query(&sql)).expect("query");
                spent += started.elapsed();
            }
            spent
        })
    });
    c.bench_function("cluster/first_query_from_store_10k", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
                let joined = runtime.block_on(member(&cluster, &store));
                let started = Instant::now();
                runtime.block_on(async {
                    joined.open_named(&store, &remote_sql).await.expect("open");
                    store.query(&remote_sql).await.expect("query")
                });
                spent += started.elapsed();
            }
            spent
        })
    });
    // Its parts: reading the entry and the Parquet file, then taking the rows in.
    let scope = cluster.scope("bench");
    c.bench_function("cluster/read_from_store_10k", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let entry = cluster
                    .entry(&scope, &minted.reference)
                    .await
                    .expect("entry")
                    .expect("stored");
                cluster.batches(&scope, &entry).await.expect("read")
            })
        })
    });
    c.bench_function("cluster/publish_10k", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Store::new(StoreSettings::default()).expect("store");
                let joined = runtime.block_on(member(&cluster, &store));
                let ingested = loom::ingest::ingest_json_array(&text).expect("ingest");
                let new = common::new_dataset("rows", ingested);
                let started = Instant::now();
                store.add(new).expect("add");
                runtime.block_on(joined.settled());
                spent += started.elapsed();
            }
            spent
        })
    });
    // What a new envelope's join hints cost in a cluster when nothing held elsewhere may join
    // it: the scope holds 100 entries (the 10k dataset and 99 small ones); a fresh session lists
    // them and reads the 32 newest, a session that listed within 5 s reuses the listing.
    for i in 0..99 {
        common::hold(
            &minting,
            "orders",
            &format!(r#"[{{"order_no": {i}, "total": 1}}]"#),
        );
    }
    runtime.block_on(minter.settled());
    let unrelated = r#"[{"alpha_q": 1, "beta_q": 2}, {"alpha_q": 3, "beta_q": 4}]"#;
    c.bench_function("cluster/join_lookup_first_100_entries", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
                let joined = runtime.block_on(Membership::join(cluster.clone(), "bench", &store));
                store.join_from(joined.join_source());
                let new = common::hold(&store, "other", unrelated);
                let started = Instant::now();
                let held = store.join_candidates(&[new.as_ref()]);
                spent += started.elapsed();
                assert_eq!(held.len(), 1, "nothing held elsewhere may join it");
            }
            spent
        })
    });
    let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
    let joined = runtime.block_on(Membership::join(cluster.clone(), "bench", &store));
    store.join_from(joined.join_source());
    let new = common::hold(&store, "other", unrelated);
    store.join_candidates(&[new.as_ref()]);
    c.bench_function("cluster/join_lookup_listed_100_entries", |b| {
        b.iter(|| store.join_candidates(&[new.as_ref()]))
    });
    c.bench_function("cluster/add_10k_alone", |b| {
        b.iter_custom(|iterations| {
            let mut spent = Duration::ZERO;
            for _ in 0..iterations {
                let store = Store::new(StoreSettings::default()).expect("store");
                let ingested = loom::ingest::ingest_json_array(&text).expect("ingest");
                let new = common::new_dataset("rows", ingested);
                let started = Instant::now();
                store.add(new).expect("add");
                spent += started.elapsed();
            }
            spent
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(10));
    targets = bench
}
criterion_main!(benches);
