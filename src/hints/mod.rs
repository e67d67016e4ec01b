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

use crate::envelope::sql::quote_ident;
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
    let a = tokens(this);
    let b = tokens(other);
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let table: Vec<String> = tokens(other_table);
    if a == b {
        // A bare `id` names a different thing in every table: `orders.id` is not `users.id`.
        // (A bare `sku` or `email` is the same thing everywhere.)
        let generic = a.len() == 1 && SURROGATE_KEYS.contains(&a[0].as_str());
        return if generic { 0.1 } else { 1.0 };
    }
    // `user_id` ↔ `id` of a dataset about users.
    if let ([.., entity, last], [only]) = (a.as_slice(), b.as_slice())
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

fn comparable(a: &ColumnProfile, b: &ColumnProfile) -> bool {
    let class = |t: &str| -> Option<u8> {
        match t {
            "Int64" | "Int32" | "UInt64" | "UInt32" | "Decimal128(38, 0)" | "Utf8" => Some(0),
            t if t.starts_with("Date") => Some(1),
            _ => None,
        }
    };
    matches!((class(&a.data_type), class(&b.data_type)), (Some(x), Some(y)) if x == y)
}

/// Share of `a`'s sketch found among `b`'s distinct values.
fn containment(a: &ColumnProfile, b: &ColumnProfile) -> f64 {
    if a.sketch.is_empty() {
        return 0.0;
    }
    // Most pairs share nothing: 8 sampled values all absent decide that quickly. (A pair with
    // real overlap misses all 8 only when its containment is low — 0.5 gives 0.4% — and such a
    // pair scores at the edge of MIN_SCORE anyway.)
    let probe = a.sketch.len().min(8);
    let early = a.sketch[..probe]
        .iter()
        .filter(|h| b.distinct_hashes.contains(h))
        .count();
    if early == 0 {
        return 0.0;
    }
    let found = early
        + a.sketch[probe..]
            .iter()
            .filter(|h| b.distinct_hashes.contains(h))
            .count();
    found as f64 / a.sketch.len() as f64
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

/// The best hints for `new` against `others` (which may include `new` itself; it is skipped).
pub fn hints_for(new: &Dataset, others: &[Arc<Dataset>]) -> Vec<JoinHint> {
    let mut hints: Vec<JoinHint> = Vec::new();
    for other in others.iter().filter(|o| o.reference != new.reference) {
        for a in &new.profile {
            if a.approx_distinct < 2 {
                continue;
            }
            for b in &other.profile {
                if b.approx_distinct < 2 || !comparable(a, b) {
                    continue;
                }
                let names = name_affinity(&a.name, &b.name, &other.provenance.tool)
                    .max(name_affinity(&b.name, &a.name, &new.provenance.tool));
                // Both directions: A → B (new holds the foreign key) and B → A.
                let forward = (containment(a, b), b.uniqueness, evidence(a));
                let backward = (containment(b, a), a.uniqueness, evidence(b));
                let score_of = |(c, u, e): (f64, f64, f64)| {
                    if c <= 0.0 {
                        0.0
                    } else {
                        c * (0.55 + 0.45 * u) * (0.7 + 0.3 * names) * (0.5 + 0.5 * e)
                    }
                };
                let (best, evidence) = if score_of(forward) >= score_of(backward) {
                    (score_of(forward), forward)
                } else {
                    (score_of(backward), backward)
                };
                if best < MIN_SCORE {
                    continue;
                }
                hints.push(JoinHint {
                    column: a.name.clone(),
                    reference: other.reference.clone(),
                    other_column: b.name.clone(),
                    score: round3(best),
                    containment: round3(evidence.0),
                    other_uniqueness: round3(evidence.1),
                    name_match: round3(names),
                    example: example(new, a, other, b),
                });
            }
        }
    }
    hints.sort_by(|x, y| {
        y.score
            .partial_cmp(&x.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| x.column.cmp(&y.column))
    });
    // One hint per column pair direction is enough; keep a column's best few.
    hints.truncate(MAX_HINTS);
    hints
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
