//! `loom snapshots list|gc`: housekeeping for a snapshot root that many sessions write to.

use std::io::Write;
use std::process::ExitCode;

use crate::snapshot::{self, Location, Session};

/// `30d`, `12h`, `2w`: how old a session must be (since its last write) to be collected.
pub(super) fn parse_age(text: &str) -> Result<chrono::Duration, String> {
    let bad = || {
        format!(
            "--older-than `{text}` is not an age: write a whole number and a unit, h (hours), \
             d (days) or w (weeks), e.g. 30d"
        )
    };
    let text = text.trim();
    let unit = text.chars().last().ok_or_else(bad)?;
    let number: i64 = text[..text.len() - unit.len_utf8()]
        .parse()
        .map_err(|_| bad())?;
    if number < 0 {
        return Err(bad());
    }
    match unit {
        'h' => chrono::Duration::try_hours(number),
        'd' => chrono::Duration::try_days(number),
        'w' => chrono::Duration::try_weeks(number),
        _ => None,
    }
    .ok_or_else(bad)
}

struct Row {
    session: Session,
    created: String,
    datasets: usize,
    rows: usize,
    complete: Option<bool>,
    usage: snapshot::Usage,
}

async fn rows(location: &Location) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for session in snapshot::sessions(location).await? {
        let usage = snapshot::usage(location, &session).await?;
        let manifest = snapshot::manifest(location, &session).await.ok();
        out.push(Row {
            created: manifest
                .as_ref()
                .map_or_else(|| "?".to_string(), |m| m.created_at.clone()),
            datasets: manifest.as_ref().map_or(0, |m| m.datasets.len()),
            rows: manifest
                .as_ref()
                .map_or(0, |m| m.datasets.iter().map(|d| d.rows).sum()),
            complete: manifest.as_ref().map(|m| m.complete),
            session,
            usage,
        });
    }
    Ok(out)
}

fn age(row: &Row, now: chrono::DateTime<chrono::Utc>) -> Option<chrono::Duration> {
    row.usage.newest.map(|newest| now - newest)
}

fn human_age(age: Option<chrono::Duration>) -> String {
    match age {
        None => "?".into(),
        Some(a) if a.num_days() >= 2 => format!("{}d", a.num_days()),
        Some(a) if a.num_hours() >= 2 => format!("{}h", a.num_hours()),
        Some(a) => format!("{}m", a.num_minutes().max(0)),
    }
}

async fn list(location: &Location) -> Result<(), String> {
    let now = chrono::Utc::now();
    let rows = rows(location).await?;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("cannot write the output: {e}");
    writeln!(
        out,
        "{:<30} {:<24} {:>6} {:>8} {:>10} {:>12} complete",
        "session", "created", "age", "datasets", "rows", "bytes"
    )
    .map_err(io)?;
    for row in &rows {
        writeln!(
            out,
            "{:<30} {:<24} {:>6} {:>8} {:>10} {:>12} {}",
            row.session.id,
            row.created,
            human_age(age(row, now)),
            row.datasets,
            row.rows,
            row.usage.bytes,
            match row.complete {
                Some(true) => "yes",
                Some(false) => "no",
                None => "no manifest",
            }
        )
        .map_err(io)?;
    }
    writeln!(out, "{} sessions under {}", rows.len(), location.url_base).map_err(io)
}

async fn gc(location: &Location, older_than: chrono::Duration, delete: bool) -> Result<(), String> {
    let now = chrono::Utc::now();
    let old: Vec<Row> = rows(location)
        .await?
        .into_iter()
        .filter(|row| age(row, now).is_some_and(|a| a >= older_than))
        .collect();
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("cannot write the output: {e}");
    let bytes: u64 = old.iter().map(|r| r.usage.bytes).sum();
    for row in &old {
        if delete {
            let n = snapshot::delete_session(location, &row.session).await?;
            writeln!(out, "deleted {} ({n} objects)", row.session.id).map_err(io)?;
        } else {
            writeln!(
                out,
                "would delete {} (last written {} ago, {} objects, {} bytes)",
                row.session.id,
                human_age(age(row, now)),
                row.usage.objects,
                row.usage.bytes
            )
            .map_err(io)?;
        }
    }
    if delete {
        writeln!(out, "{} sessions deleted ({bytes} bytes)", old.len()).map_err(io)
    } else {
        writeln!(
            out,
            "{} sessions ({bytes} bytes) would be deleted; nothing was: run again with --delete",
            old.len()
        )
        .map_err(io)
    }
}

pub(super) enum Action {
    List,
    Gc {
        older_than: chrono::Duration,
        delete: bool,
    },
}

pub(super) fn run(url: &str, action: Action) -> ExitCode {
    let Some(runtime) = super::runtime() else {
        return ExitCode::from(super::EXIT_START);
    };
    let result = runtime.block_on(async {
        let location = snapshot::open_existing(url)?;
        match action {
            Action::List => list(&location).await,
            Action::Gc { older_than, delete } => gc(&location, older_than, delete).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loom snapshots: {error}");
            ExitCode::from(super::EXIT_START)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_need_a_number_and_a_unit() {
        assert_eq!(parse_age("30d"), Ok(chrono::Duration::days(30)));
        assert_eq!(parse_age("12h"), Ok(chrono::Duration::hours(12)));
        assert_eq!(parse_age("2w"), Ok(chrono::Duration::weeks(2)));
        assert_eq!(parse_age("0d"), Ok(chrono::Duration::zero()));
        for bad in [
            "",
            "30",
            "d",
            "-1d",
            "3.5d",
            "30m",
            "30 days",
            "99999999999999w",
            "१d",
        ] {
            let error = parse_age(bad).expect_err(bad);
            assert!(error.contains("e.g. 30d"), "{bad}: {error}");
        }
    }
}
