//! Join hints: which columns of a new dataset join with columns of the datasets already held.
//!
//! Evidence, not names alone. For a column pair (A of the new dataset, B of another):
//! - **containment**: the share of A's distinct values found in B (foreign key → key), estimated
//!   from A's bottom-k hash sketch looked up in B's distinct-hash set — both computed once at
//!   ingest, so scoring never re-scans a table. Both directions are tried (the new dataset may
//!   hold the key side); the better one is reported.
//! - **uniqueness** of the key side (a key is near-unique);
//! - **name affinity**: same name; `user_id` ↔ `id` (stronger when the other dataset is about
//!   users); `assignee_login` ↔ `login`; a shared key token (`id`, `key`, `uuid`, `email`, `code`,
//!   `sku`, `slug`) matched as a whole token — never inside `paid` or `monkey`;
//! - **cardinality**: a column with few distinct values (1–5 ratings, small counts) overlaps with
//!   any key by accident, so its evidence counts less.
//!
//! A pair without value overlap is never a hint, whatever the names.

use std::sync::Arc;

use serde::Serialize;

use crate::common::sql::quote_ident;
use crate::store::{ColumnProfile, Dataset};

/// At most this many hints per envelope.
pub const MAX_HINTS: usize = 5;
/// Pairs scoring below this are not hints.
pub const MIN_SCORE: f64 = 0.45;
/// Distinct values from which a column's overlap counts fully.
const FULL_EVIDENCE_DISTINCT: f64 = 20.0;
const KEY_TOKENS: &[&str] = &["id", "key", "uuid", "email", "code", "sku", "slug"];
/// Key names that mean "this table's own row" rather than a shared natural key.
const SURROGATE_KEYS: &[&str] = &["id", "key", "uuid"];

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinHint {
    pub column: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub other_column: String,
    pub score: f64,
    pub containment: f64,
    pub other_uniqueness: f64,
    pub name_match: f64,
    pub example: String,
    /// What the other dataset is, when the ref alone does not tell: the table of an earlier
    /// result that reached the client whole (SPEC §8.4, §14).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
}

/// Lowercase tokens of a column name, split on `_`, `-`, spaces and camelCase humps.
pub fn tokens(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies") {
        format!("{stem}y")
    } else if word.len() > 2 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_string()
    } else {
        word.to_string()
    }
}

/// How strongly the names say these columns join (0..1). `other_table` is the other dataset's
/// tool name (`list_users`), used to read `user_id` ↔ `users.id`.
pub fn name_affinity(this: &str, other: &str, other_table: &str) -> f64 {
    token_affinity(&tokens(this), &tokens(other), &tokens(other_table))
}

/// [`name_affinity`] over names already split into [`tokens`].
fn token_affinity(a: &[String], b: &[String], table: &[String]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    if a == b {
        // A bare `id` names a different thing in every table: `orders.id` is not `users.id`.
        // (A bare `sku` or `email` is the same thing everywhere.)
        let generic = a.len() == 1 && SURROGATE_KEYS.contains(&a[0].as_str());
        return if generic { 0.1 } else { 1.0 };
    }
    // `user_id` ↔ `id` of a dataset about users.
    if let ([.., entity, last], [only]) = (a, b)
        && last == only
        && KEY_TOKENS.contains(&only.as_str())
    {
        let about = table.iter().any(|t| singular(t) == singular(entity));
        return if about { 0.9 } else { 0.6 };
    }
    // `assignee_login` ↔ `login`: the other name is this one's last token(s).
    if a.len() > b.len() && a[a.len() - b.len()..] == b[..] {
        return 0.7;
    }
    if b.len() > a.len() && b[b.len() - a.len()..] == a[..] {
        return 0.7;
    }
    let shared_key = KEY_TOKENS
        .iter()
        .any(|k| a.iter().any(|t| t == k) && b.iter().any(|t| t == k));
    if shared_key { 0.4 } else { 0.0 }
}

/// Which columns can meet at all: integers (Int32/Int64/UInt32/UInt64, Decimal128(38, 0)) and
/// text (canonical integer strings share the integers' hashes) in one class, dates in another.
fn join_class(column: &ColumnProfile) -> Option<u8> {
    match column.data_type.as_str() {
        "Int64" | "Int32" | "UInt64" | "UInt32" | "Decimal128(38, 0)" | "Utf8" => Some(0),
        t if t.starts_with("Date") => Some(1),
        _ => None,
    }
}

/// How many of the smallest sketch values are looked up before deciding a pair shares nothing.
const PROBE: usize = 8;

/// Share of `a`'s sketch found among `b`'s distinct hashes. Both are ascending, so the lookups
/// are one merge of two sorted runs (galloping through `b`). When `b` keeps only its smallest
/// hashes, only the sketch values within that range are evidence.
fn containment(a: &ColumnProfile, b: &ColumnProfile) -> f64 {
    let sample = match (b.capped, b.distinct_hashes.last()) {
        (true, Some(&max)) => &a.sketch[..a.sketch.partition_point(|h| *h <= max)],
        _ => &a.sketch[..],
    };
    if sample.is_empty() {
        return 0.0;
    }
    let mut rest: &[u64] = &b.distinct_hashes;
    let mut found = 0usize;
    for (looked, hash) in sample.iter().enumerate() {
        // Most pairs share nothing: the first PROBE values all absent decide that quickly. (A
        // pair with real overlap misses all of them only when its containment is low — 0.5
        // gives 0.4% — and such a pair scores at the edge of MIN_SCORE anyway.)
        if looked == PROBE && found == 0 {
            return 0.0;
        }
        // The first position of `rest` holding a value ≥ hash: gallop, then bisect.
        let mut bound = 1;
        while bound < rest.len() && rest[bound] < *hash {
            bound *= 2;
        }
        let low = bound / 2;
        let high = (bound + 1).min(rest.len());
        let at = low + rest[low..high].partition_point(|h| h < hash);
        rest = &rest[at..];
        if rest.first() == Some(hash) {
            found += 1;
            rest = &rest[1..];
        }
        if rest.is_empty() {
            break;
        }
    }
    found as f64 / sample.len() as f64
}

fn evidence(a: &ColumnProfile) -> f64 {
    (a.approx_distinct as f64 / FULL_EVIDENCE_DISTINCT).min(1.0)
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A ready JOIN; an integer column meeting a text one is cast to text (always valid).
fn example(new: &Dataset, a: &ColumnProfile, other: &Dataset, b: &ColumnProfile) -> String {
    let side = |table: &str, column: &ColumnProfile, cast: bool| {
        let reference = format!("{table}.{}", quote_ident(&column.name));
        if cast {
            format!("CAST({reference} AS VARCHAR)")
        } else {
            reference
        }
    };
    let text = |c: &ColumnProfile| c.data_type == "Utf8";
    let mixed = text(a) != text(b);
    format!(
        "SELECT * FROM {n} JOIN {o} ON {l} = {r} LIMIT 10",
        n = new.reference,
        o = other.reference,
        l = side(&new.reference, a, mixed && !text(a)),
        r = side(&other.reference, b, mixed && !text(b)),
    )
}

/// A pair that passed, before its texts are written (only the best few ever are).
struct Candidate {
    score: f64,
    other: usize,
    a: usize,
    b: usize,
    /// (containment, key-side uniqueness, evidence) of the direction that won.
    evidence: (f64, f64, f64),
    names: f64,
}

/// The score of one direction: containment × key uniqueness × name affinity × evidence.
fn score((containment, uniqueness, evidence): (f64, f64, f64), names: f64) -> f64 {
    if containment <= 0.0 {
        0.0
    } else {
        containment * (0.55 + 0.45 * uniqueness) * (0.7 + 0.3 * names) * (0.5 + 0.5 * evidence)
    }
}

/// The best hints for `new` against `others` (which may include `new` itself; it is skipped).
///
/// Cheap tests first: type class and distinct counts, then value overlap from the sketches;
/// names are only read for pairs that share values (without overlap a pair is never a hint),
/// and texts are only written for the hints returned.
pub fn hints_for(new: &Dataset, others: &[Arc<Dataset>]) -> Vec<JoinHint> {
    let new_classes: Vec<Option<u8>> = new.profile().iter().map(join_class).collect();
    let new_table = tokens(&new.provenance.tool);
    let mut new_tokens: Vec<Option<Vec<String>>> = vec![None; new.profile().len()];
    let mut candidates: Vec<Candidate> = Vec::new();
    for (other_index, other) in others.iter().enumerate() {
        if other.reference == new.reference {
            continue;
        }
        let other_table = tokens(&other.provenance.tool);
        let mut other_tokens: Vec<Option<Vec<String>>> = vec![None; other.profile().len()];
        for (a_index, a) in new.profile().iter().enumerate() {
            let Some(class) = new_classes[a_index] else {
                continue;
            };
            if a.approx_distinct < 2 {
                continue;
            }
            for (b_index, b) in other.profile().iter().enumerate() {
                if b.approx_distinct < 2 || join_class(b) != Some(class) {
                    continue;
                }
                // Both directions: A → B (new holds the foreign key) and B → A.
                let forward = (containment(a, b), b.uniqueness, evidence(a));
                let backward = (containment(b, a), a.uniqueness, evidence(b));
                if score(forward, 1.0).max(score(backward, 1.0)) < MIN_SCORE {
                    continue;
                }
                let a_tokens = new_tokens[a_index].get_or_insert_with(|| tokens(&a.name));
                let b_tokens = other_tokens[b_index].get_or_insert_with(|| tokens(&b.name));
                let names = token_affinity(a_tokens, b_tokens, &other_table)
                    .max(token_affinity(b_tokens, a_tokens, &new_table));
                let (best, evidence) = if score(forward, names) >= score(backward, names) {
                    (score(forward, names), forward)
                } else {
                    (score(backward, names), backward)
                };
                if best >= MIN_SCORE {
                    candidates.push(Candidate {
                        score: best,
                        other: other_index,
                        a: a_index,
                        b: b_index,
                        evidence,
                        names,
                    });
                }
            }
        }
    }
    candidates.sort_by(|x, y| {
        y.score
            .partial_cmp(&x.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| new.profile()[x.a].name.cmp(&new.profile()[y.a].name))
    });
    candidates.truncate(MAX_HINTS);
    candidates
        .into_iter()
        .map(|c| {
            let other = &others[c.other];
            let (a, b) = (&new.profile()[c.a], &other.profile()[c.b]);
            JoinHint {
                column: a.name.clone(),
                reference: other.reference.clone(),
                other_column: b.name.clone(),
                score: round3(c.score),
                containment: round3(c.evidence.0),
                other_uniqueness: round3(c.evidence.1),
                name_match: round3(c.names),
                example: example(new, a, other, b),
                about: other.passed_through.then(|| {
                    format!(
                        "an earlier result of {} row{} from {}/{}, passed to you whole",
                        other.rows,
                        if other.rows == 1 { "" } else { "s" },
                        other.provenance.server,
                        other.provenance.tool
                    )
                }),
            }
        })
        .collect()
}

/// The best hints for several new datasets (found in one result) against everything held.
pub fn hints_for_all(new: &[&Dataset], held: &[Arc<Dataset>]) -> Vec<JoinHint> {
    let mut all: Vec<JoinHint> = new.iter().flat_map(|d| hints_for(d, held)).collect();
    all.sort_by(|x, y| {
        y.score
            .partial_cmp(&x.score)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    all.truncate(MAX_HINTS);
    all
}

#[cfg(test)]
mod tests;
