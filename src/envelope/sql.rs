//! SQL text loom writes for the model: quoted identifiers and the ready-to-run example.

pub(crate) use crate::common::sql::quote_ident;
use crate::store::Dataset;

/// A ready SQL example over real column names: a group-by over a low-cardinality text column
/// when there is one, else an aggregate over a numeric column, else the first rows.
pub(crate) fn example(dataset: &Dataset) -> String {
    let table = &dataset.reference;
    // A column whose name would not be shown whole is no example.
    let usable = |name: &str| name.chars().count() <= super::MAX_NAME_CHARS;
    let group = dataset.profile().iter().find(|p| {
        p.data_type == "Utf8"
            && p.approx_distinct >= 2
            && p.approx_distinct <= 50
            && usable(&p.name)
    });
    if let Some(column) = group {
        let c = quote_ident(&column.name);
        return format!(
            "SELECT {c}, count(*) AS n FROM {table} GROUP BY {c} ORDER BY n DESC LIMIT 10"
        );
    }
    let numeric = dataset
        .profile()
        .iter()
        .find(|p| matches!(p.data_type.as_str(), "Int64" | "Float64") && usable(&p.name));
    if let Some(column) = numeric {
        let c = quote_ident(&column.name);
        return format!("SELECT min({c}), max({c}), avg({c}) FROM {table}");
    }
    format!("SELECT * FROM {table} LIMIT 10")
}

/// The envelope's `usage` line.
pub(crate) fn usage(datasets: &[&Dataset]) -> String {
    match datasets {
        [] => String::new(),
        [one] => format!(
            "loom_query {{\"sql\": \"{}\"}}",
            example(one).replace('"', "\\\"")
        ),
        many => format!(
            "loom_query over any of {}; e.g. {{\"sql\": \"{}\"}}",
            many.iter()
                .map(|d| d.reference.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            example(many[0]).replace('"', "\\\"")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_only_when_needed() {
        assert_eq!(quote_ident("user_id"), "user_id");
        assert_eq!(quote_ident("ID"), "\"ID\"");
        assert_eq!(quote_ident("select"), "\"select\"");
        assert_eq!(quote_ident("1st"), "\"1st\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
