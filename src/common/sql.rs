//! SQL identifiers as loom writes them for the model (envelopes, join hints, usage examples).

use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;

/// An identifier as SQL must spell it: bare when it is lowercase `[a-z_][a-z0-9_]*` and not a
/// keyword (DataFusion folds unquoted identifiers to lowercase), else double-quoted.
pub(crate) fn quote_ident(name: &str) -> String {
    let simple = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let keyword = ALL_KEYWORDS.contains(&name.to_ascii_uppercase().as_str());
    if simple && !keyword {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}
