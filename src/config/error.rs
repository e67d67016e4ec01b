//! The error a broken configuration produces: every problem found, not just the first, so a user
//! fixes the file in one pass instead of one restart per mistake.

use std::fmt;

/// The path reported for problems that concern the document as a whole.
pub const ROOT_PATH: &str = "(root)";

/// The path reported when the file itself could not be read. [`ConfigError`]'s `Display` prints
/// such an error as the bare message, because "1 problem in a file we could not open" reads oddly.
pub const FILE_PATH: &str = "(file)";

/// Every problem in a configuration at once.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", render(.origin, .problems))]
pub struct ConfigError {
    /// The file name used in messages.
    pub origin: String,
    pub problems: Vec<Problem>,
}

/// One violation, located by a path such as `servers[1].name`, `mcpServers.github.env.TOKEN`,
/// `restart.maxAttempts` or `(root)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    /// An empty path means the document root, so callers can build child paths from `""`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        let path = path.into();
        Problem {
            path: if path.is_empty() {
                ROOT_PATH.to_owned()
            } else {
                path
            },
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl ConfigError {
    /// The file could not be read at all; `message` already names the path and the cause.
    pub fn unreadable(origin: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            origin: origin.into(),
            problems: vec![Problem::new(FILE_PATH, message)],
        }
    }

    /// True when the file could not be read (as opposed to read but invalid).
    pub fn is_unreadable(&self) -> bool {
        matches!(self.problems.as_slice(), [only] if only.path == FILE_PATH)
    }
}

fn render(origin: &str, problems: &[Problem]) -> String {
    if let [only] = problems
        && only.path == FILE_PATH
    {
        return only.message.clone();
    }
    let n = problems.len();
    let noun = if n == 1 { "problem" } else { "problems" };
    let mut out = format!("invalid configuration in {origin}: {n} {noun}");
    for p in problems {
        out.push_str("\n  - ");
        out.push_str(&p.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_every_problem_under_a_header() {
        let err = ConfigError {
            origin: "loom.config.json".into(),
            problems: vec![
                Problem::new("servers[0].command", "missing required key `command`"),
                Problem::new("", "something at the root"),
            ],
        };
        assert_eq!(
            err.to_string(),
            "invalid configuration in loom.config.json: 2 problems\n  \
             - servers[0].command: missing required key `command`\n  \
             - (root): something at the root"
        );
    }

    #[test]
    fn display_uses_singular_for_one_problem() {
        let err = ConfigError {
            origin: "a.json".into(),
            problems: vec![Problem::new(
                "tokenThreshold",
                "must be at least 100, found 50",
            )],
        };
        assert!(
            err.to_string()
                .starts_with("invalid configuration in a.json: 1 problem\n")
        );
    }

    #[test]
    fn unreadable_file_displays_only_the_message() {
        let err = ConfigError::unreadable("x.json", "cannot read x.json: gone");
        assert!(err.is_unreadable());
        assert_eq!(err.to_string(), "cannot read x.json: gone");
        assert_eq!(err.problems[0].path, FILE_PATH);
    }
}
