//! `loom query`: re-open a session snapshot and query it with the same sealed engine, after the
//! conversation is over.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::ValueEnum;

use crate::store::{NewDataset, Provenance, Store, StoreSettings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
    Ndjson,
}

/// What to do with the session.
pub(super) enum Action<'a> {
    List,
    Describe(&'a str),
    Sql(&'a str, OutputFormat),
}

/// Open `url`'s session (`session` or the latest) into a fresh store.
async fn load(url: &str, session: Option<&str>) -> Result<(String, Arc<Store>), String> {
    let location = crate::snapshot::open_existing(url)?;
    let sessions = crate::snapshot::sessions(&location).await?;
    let session = match session {
        // The id, or the folder's name as an engine shows it (`session_id=…`).
        Some(s) if let Some(found) = sessions.iter().find(|n| n.id == s || n.folder == s) => {
            found.clone()
        }
        Some(s) => {
            return Err(format!(
                "no session `{s}` under {url}; sessions there: {}",
                if sessions.is_empty() {
                    "none".to_string()
                } else {
                    sessions
                        .iter()
                        .map(|n| n.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
        None => {
            // The latest session that has a manifest: one killed before its first manifest
            // (or being written right now) is not "the latest session" yet.
            let mut latest = None;
            for candidate in sessions.iter().rev() {
                if let Ok(manifest) = crate::snapshot::manifest(&location, candidate).await {
                    latest = Some((candidate.clone(), manifest));
                    break;
                }
            }
            match latest {
                Some(found) => found.0,
                None if sessions.is_empty() => {
                    return Err(format!("no snapshot sessions under {url}"));
                }
                None => {
                    return Err(format!(
                        "no session under {url} has a readable manifest.json (sessions there: {})",
                        sessions
                            .iter()
                            .map(|n| n.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
    };
    let manifest = crate::snapshot::manifest(&location, &session).await?;
    if !manifest.complete {
        // What is listed opens; the user should know what is not there.
        let missing: Vec<String> = manifest
            .missing
            .iter()
            .map(|m| format!("{} ({})", m.reference, m.error))
            .collect();
        eprintln!(
            "loom query: session `{}` is incomplete: {}",
            session.id,
            if missing.is_empty() {
                "its writer stopped with datasets still waiting to be written".to_string()
            } else {
                format!("not written: {}", missing.join("; "))
            }
        );
    }
    if manifest.datasets.is_empty() {
        return Err(format!("session `{}` has no datasets", session.id));
    }
    let store = fresh_store()?;
    for entry in &manifest.datasets {
        let (schema, batches) =
            crate::snapshot::dataset_batches(&location, &session, entry).await?;
        let columns = crate::ingest::ColumnInfo::of_schema(&schema, true);
        store.add(NewDataset {
            server: entry.provenance.server.clone(),
            tool: entry.provenance.tool.clone(),
            batches,
            schema,
            columns,
            provenance: Provenance {
                server: entry.provenance.server.clone(),
                tool: entry.provenance.tool.clone(),
                args: entry.provenance.args.clone(),
                created_at: entry.created_at.clone(),
                source: entry.provenance.source.clone(),
            },
            pinned: true,
            implicit: false,
            passed_through: false,
            name: Some(entry.reference.clone()),
        })?;
    }
    Ok((session.id, store))
}

/// Which sessions `loom query` opens.
pub(super) enum Sessions<'a> {
    /// `--session ID`, or the latest when `None`.
    One(Option<&'a str>),
    /// `--all-sessions`.
    All,
}

fn fresh_store() -> Result<Arc<Store>, String> {
    Ok(Arc::new(Store::new(StoreSettings {
        memory_budget_bytes: u64::MAX,
        ..StoreSettings::default()
    })?))
}

/// Every session under `url` as one catalog: `loom_catalog`, and the cross-session tables that
/// `action` can use (only those are read).
async fn load_all(url: &str, action: &Action<'_>) -> Result<(String, Arc<Store>), String> {
    use crate::snapshot::catalog;
    let location = crate::snapshot::open_existing(url)?;
    let sessions = crate::snapshot::sessions(&location).await?;
    if sessions.is_empty() {
        return Err(format!("no snapshot sessions under {url}"));
    }
    let count = sessions.len();
    let (manifests, unreadable) = catalog::all_manifests(&location, sessions).await;
    for error in &unreadable {
        eprintln!("loom query: left out: {error}");
    }
    let store = fresh_store()?;
    let add = |name: &str, schema: arrow::datatypes::SchemaRef, batches, source: &str| {
        store.add(NewDataset {
            server: "loom".into(),
            tool: "snapshots".into(),
            columns: crate::ingest::ColumnInfo::of_schema(&schema, true),
            schema,
            batches,
            provenance: Provenance {
                server: "loom".into(),
                tool: "snapshots".into(),
                args: serde_json::json!({ "root": url }),
                created_at: crate::common::text::now_rfc3339(),
                source: source.into(),
            },
            pinned: true,
            implicit: false,
            passed_through: false,
            name: Some(name.to_string()),
        })
    };
    let batch = catalog::catalog_batch(&manifests)?;
    add(
        catalog::CATALOG_TABLE,
        batch.schema(),
        vec![batch],
        "catalog",
    )?;
    for (table, members) in catalog::tables(&manifests) {
        let wanted = match action {
            Action::Sql(sql, _) => catalog::mentions(sql, &table),
            Action::Describe(name) => *name == table,
            Action::List => false,
        };
        if wanted {
            let (schema, batches) = catalog::union_table(&location, &members).await?;
            add(&table, schema, batches, "all sessions")?;
        }
    }
    if let Action::List = action {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let io = |e: std::io::Error| format!("cannot write the output: {e}");
        writeln!(out, "{count} sessions under {url}").map_err(io)?;
        writeln!(
            out,
            "\n{}  {} datasets (every dataset of every session, with provenance)",
            catalog::CATALOG_TABLE,
            manifests
                .iter()
                .map(|(_, m)| m.datasets.len())
                .sum::<usize>()
        )
        .map_err(io)?;
        for (table, members) in catalog::tables(&manifests) {
            let rows: usize = members.iter().map(|(_, d)| d.rows).sum();
            let mut in_sessions: Vec<&str> = members.iter().map(|(s, _)| s.id.as_str()).collect();
            in_sessions.dedup();
            writeln!(
                out,
                "\n{table}  {rows} rows from {} datasets in {} sessions\n  columns: {} then the datasets' own",
                members.len(),
                in_sessions.len(),
                catalog::PROVENANCE_COLUMNS.join(", ")
            )
            .map_err(io)?;
        }
    }
    Ok((format!("{count} sessions"), store))
}

async fn execute(url: &str, sessions: Sessions<'_>, action: Action<'_>) -> Result<(), String> {
    let (session, store) = match sessions {
        Sessions::One(session) => load(url, session).await?,
        Sessions::All => {
            let loaded = load_all(url, &action).await?;
            if let Action::List = action {
                return Ok(());
            }
            loaded
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = |e: std::io::Error| format!("cannot write the output: {e}");
    match action {
        Action::List => {
            writeln!(out, "session {session}").map_err(io)?;
            for d in store.list() {
                let columns: Vec<String> = d
                    .profile()
                    .iter()
                    .map(|p| format!("{} {}", p.name, p.data_type))
                    .collect();
                writeln!(
                    out,
                    "\n{}  {} rows\n  columns: {}\n  from: {} / {} {} (source {}, {})",
                    d.reference,
                    d.rows,
                    columns.join(", "),
                    d.provenance.server,
                    d.provenance.tool,
                    d.provenance.args,
                    d.provenance.source,
                    d.provenance.created_at
                )
                .map_err(io)?;
            }
        }
        Action::Describe(reference) => {
            let Some(d) = store.get(reference) else {
                return Err(format!(
                    "no dataset `{reference}` in session {session}; datasets: {}",
                    store.references().join(", ")
                ));
            };
            let described = crate::tools::describe_dataset(&d, &store.list());
            let text = serde_json::to_string_pretty(&described).map_err(|e| e.to_string())?;
            writeln!(out, "{text}").map_err(io)?;
        }
        Action::Sql(sql, format) => {
            let started = Instant::now();
            let output = store.query(sql).await.map_err(|e| e.to_string())?;
            let names: Vec<String> = output
                .schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            match format {
                OutputFormat::Table => {
                    let table = arrow::util::pretty::pretty_format_batches(&output.batches)
                        .map_err(|e| e.to_string())?;
                    writeln!(out, "{table}").map_err(io)?;
                    writeln!(
                        out,
                        "{} row{} in {:.1} ms",
                        output.rows,
                        if output.rows == 1 { "" } else { "s" },
                        started.elapsed().as_secs_f64() * 1000.0
                    )
                    .map_err(io)?;
                }
                OutputFormat::Csv => {
                    crate::export::write_csv(&mut out, &output.batches, &names, true)
                        .map_err(io)?;
                }
                OutputFormat::Json => {
                    crate::export::write_json(&mut out, &output.batches, &names).map_err(io)?;
                }
                OutputFormat::Ndjson => {
                    for batch in &output.batches {
                        for row in 0..batch.num_rows() {
                            out.write_all(b"{").map_err(io)?;
                            for (i, (name, array)) in names.iter().zip(batch.columns()).enumerate()
                            {
                                if i > 0 {
                                    out.write_all(b",").map_err(io)?;
                                }
                                serde_json::to_writer(&mut out, name).map_err(|e| e.to_string())?;
                                out.write_all(b":").map_err(io)?;
                                crate::export::write_json_value(&mut out, array, row)
                                    .map_err(io)?;
                            }
                            out.write_all(b"}\n").map_err(io)?;
                        }
                    }
                }
            }
        }
    }
    out.flush().map_err(io)
}

pub(super) fn run(url: &str, sessions: Sessions<'_>, action: Action<'_>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loom query: cannot start the async runtime: {error}");
            return ExitCode::from(super::EXIT_START);
        }
    };
    match runtime.block_on(execute(url, sessions, action)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loom query: {error}");
            ExitCode::from(super::EXIT_START)
        }
    }
}
