//! Export file names: a plain, visible basename inside the session's export folder that ends
//! in the format's extension, or a clear refusal.

/// The longest name accepted (well inside every filesystem's limit).
pub(crate) const MAX_CHARS: usize = 128;

/// Names Windows reserves for devices, with or without an extension.
const RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// The file name to write: `requested` checked, with the format's extension added when it has
/// none (a name with another extension is refused); the default `<ref>.<ext>` when nothing was
/// requested.
pub(crate) fn resolve(
    requested: Option<&str>,
    reference: &str,
    extension: &str,
) -> Result<String, String> {
    let Some(name) = requested else {
        return Ok(format!("{reference}.{extension}"));
    };
    let refuse = |why: &str| {
        Err(format!(
            "filename {name:?} {why}; give a plain file name like \"{reference}.{extension}\" \
             (letters, digits, `-`, `_`, `.`), or leave it out"
        ))
    };
    if name.trim().is_empty() {
        return refuse("is empty");
    }
    if name.contains('\0') || name.chars().any(char::is_control) {
        return refuse("contains control characters");
    }
    if name.contains('/') || name.contains('\\') || name.contains(':') {
        return refuse("is a path, not a file name (exports are written inside exportDir only)");
    }
    if name == "." || name == ".." {
        return refuse("names a directory");
    }
    if name.starts_with('.') {
        return refuse("would be a hidden file");
    }
    if name.chars().count() > MAX_CHARS {
        return refuse(&format!("is longer than {MAX_CHARS} characters"));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return refuse("ends with a dot or a space");
    }
    let stem = name.split('.').next().unwrap_or(name).to_ascii_lowercase();
    if RESERVED.contains(&stem.as_str()) {
        return refuse("is a reserved device name");
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ' ' | '(' | ')' | '+'))
    {
        return refuse(
            "contains characters other than letters, digits, space, `-`, `_`, `.`, `(`, `)`, `+`",
        );
    }
    if !name.contains('.') {
        return Ok(format!("{name}.{extension}"));
    }
    // A name that ends in another extension is refused, not extended: `conftest.py` or
    // `index.html` written by loom would be run or rendered by whatever picks up that kind of
    // file, with the data's text in it.
    let wanted = format!(".{extension}");
    let ends_right = name.len() > wanted.len()
        && name
            .get(name.len() - wanted.len()..)
            .is_some_and(|end| end.eq_ignore_ascii_case(&wanted));
    if !ends_right {
        return refuse(&format!(
            "does not end in `{wanted}`, the format's extension"
        ));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_get_an_extension() {
        assert_eq!(resolve(None, "ds_x_1", "csv").as_deref(), Ok("ds_x_1.csv"));
        assert_eq!(
            resolve(Some("report"), "ds_x_1", "json").as_deref(),
            Ok("report.json")
        );
        assert_eq!(
            resolve(Some("Q3 (final).csv"), "ds", "csv").as_deref(),
            Ok("Q3 (final).csv")
        );
        assert_eq!(
            resolve(Some("données.csv"), "ds", "csv").as_deref(),
            Ok("données.csv")
        );
        assert_eq!(
            resolve(Some("Report.JSON"), "ds", "json").as_deref(),
            Ok("Report.JSON")
        );
        let wrong = resolve(Some("conftest.py"), "ds", "csv").expect_err("py");
        assert!(wrong.contains("does not end in `.csv`"), "{wrong}");
    }

    #[test]
    fn everything_else_is_refused_with_a_reason() {
        for bad in [
            "",
            " ",
            ".",
            "..",
            "../etc/passwd",
            "/etc/passwd",
            "a/b.csv",
            "a\\b.csv",
            "C:evil",
            ".hidden",
            "nul",
            "CON.csv",
            "lpt1",
            "a\0b",
            "tab\there",
            "trailing.",
            "star*.csv",
            "conftest.py",
            "index.html",
            "data.csv.py",
            "report.v2",
            ".csv",
        ] {
            let error = resolve(Some(bad), "ds", "csv").expect_err(bad);
            assert!(error.contains("filename"), "{bad}: {error}");
        }
        let long = "a".repeat(MAX_CHARS + 1);
        assert!(resolve(Some(&long), "ds", "csv").is_err());
    }
}
