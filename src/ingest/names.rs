//! Column names: readable, safe to quote, and never shared by two source keys.
//!
//! Each path segment keeps its letters, digits and `_` (case kept); anything else becomes `_`.
//! Segments are joined with `_`. Two columns whose names differ only in case (`ID`, `id`) or that
//! sanitize to the same text (`a.b`, `a_b`) both survive: the later one gets `_2`, `_3`, … —
//! compared case-insensitively, because SQL identifiers are.

use std::collections::HashSet;

/// `user name` → `user_name`; an empty segment becomes `col`.
pub(crate) fn sanitize_segment(segment: &str) -> String {
    // A repeated key inside one object arrives as `key#2`.
    let (base, occurrence) = match segment.rsplit_once('#') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, Some(n))
        }
        _ => (segment, None),
    };
    let mut out: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push_str("col");
    }
    if let Some(n) = occurrence {
        out.push('_');
        out.push_str(n);
    }
    out
}

/// Unique names for columns given their source paths, in order.
pub(crate) fn column_names(paths: &[&[String]]) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    paths
        .iter()
        .map(|path| {
            let base = path
                .iter()
                .map(|s| sanitize_segment(s))
                .collect::<Vec<_>>()
                .join("_");
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name.to_lowercase()) {
                name = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(name.to_lowercase());
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(paths: &[&[&str]]) -> Vec<String> {
        let owned: Vec<Vec<String>> = paths
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect();
        let refs: Vec<&[String]> = owned.iter().map(Vec::as_slice).collect();
        column_names(&refs)
    }

    #[test]
    fn case_variants_and_sanitized_twins_all_survive() {
        assert_eq!(
            names(&[&["ID"], &["id"], &["Id"]]),
            vec!["ID", "id_2", "Id_3"]
        );
        assert_eq!(
            names(&[&["a.b"], &["a_b"], &["a", "b"]]),
            vec!["a_b", "a_b_2", "a_b_3"]
        );
        assert_eq!(names(&[&["x"], &["x_2"], &["X"]]), vec!["x", "x_2", "X_3"]);
    }

    #[test]
    fn segments_are_sanitized_and_joined() {
        assert_eq!(names(&[&["user name", "e-mail"]]), vec!["user_name_e_mail"]);
        assert_eq!(names(&[&[""]]), vec!["col"]);
        assert_eq!(names(&[&["k"], &["k#2"]]), vec!["k", "k_2"]);
        assert_eq!(names(&[&["select"], &["1st"]]), vec!["select", "1st"]);
    }
}
