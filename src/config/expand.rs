//! `${VAR}` expansion in string values.
//!
//! Syntax: `${NAME}` is the variable's value; `${NAME:-default}` falls back to `default` when the
//! variable is unset or empty (the default may itself contain references, expanded only when
//! used); `$$` is a literal `$`; any other `$` stays as written, so `$HOME` or a price like `$5`
//! pass through untouched. Substituted values are not expanded again, so a secret containing `$`
//! arrives intact.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExpandError {
    Missing {
        name: String,
        reference: String,
    },
    /// `at` is the 1-based character position of the `$` that opens the reference.
    Unterminated {
        at: usize,
    },
    BadName {
        reference: String,
    },
    /// A default nested inside more than `MAX_NESTING` others (`at` as in `Unterminated`).
    TooDeep {
        at: usize,
    },
}

/// How deep `${A:-${B:-…}}` defaults may nest. Real configs use one or two levels; the bound keeps
/// a hostile file from exhausting the stack of the recursive parser and evaluator.
pub(crate) const MAX_NESTING: usize = 16;

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::Missing { name, reference } => write!(
                f,
                "environment variable `{name}` is not set (referenced as {reference})"
            ),
            ExpandError::Unterminated { at } => write!(
                f,
                "unterminated `${{` at character {at}: close it with `}}`, or write `$$` for a literal `$`"
            ),
            ExpandError::BadName { reference } => write!(
                f,
                "invalid variable reference `{reference}`: expected `${{NAME}}` or `${{NAME:-default}}`, \
                 where NAME is letters, digits and `_`, not starting with a digit"
            ),
            ExpandError::TooDeep { at } => write!(
                f,
                "variable defaults nest more than {MAX_NESTING} deep at character {at}: \
                 write at most {MAX_NESTING} levels of `${{NAME:-${{…}}}}`"
            ),
        }
    }
}

#[derive(Debug)]
enum Piece<'a> {
    Lit(&'a str),
    Var {
        name: &'a str,
        default: Option<Vec<Piece<'a>>>,
        raw: &'a str,
    },
}

/// Expands `input`. With `keep_missing`, a reference to an unset variable (with no default) is
/// left as written instead of being an error — used for disabled servers, which should not fail
/// the whole file just because the variables they would need are absent.
pub(crate) fn expand(
    input: &str,
    env: &dyn Fn(&str) -> Option<String>,
    keep_missing: bool,
) -> Result<String, Vec<ExpandError>> {
    // Most strings have no `$` at all; skip the parser for them.
    if !input.contains('$') {
        return Ok(input.to_owned());
    }
    let mut parser = Parser {
        s: input,
        pos: 0,
        depth: 0,
    };
    let pieces = parser.sequence(false).map_err(|e| vec![e])?;
    let mut out = String::with_capacity(input.len());
    let mut errors = Vec::new();
    evaluate(&pieces, env, keep_missing, &mut out, &mut errors);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn evaluate(
    pieces: &[Piece<'_>],
    env: &dyn Fn(&str) -> Option<String>,
    keep_missing: bool,
    out: &mut String,
    errors: &mut Vec<ExpandError>,
) {
    for piece in pieces {
        match piece {
            Piece::Lit(text) => out.push_str(text),
            Piece::Var { name, default, raw } => match (env(name), default) {
                (Some(value), Some(fallback)) if value.is_empty() => {
                    evaluate(fallback, env, keep_missing, out, errors);
                }
                (Some(value), _) => out.push_str(&value),
                (None, Some(fallback)) => evaluate(fallback, env, keep_missing, out, errors),
                (None, None) if keep_missing => out.push_str(raw),
                (None, None) => errors.push(ExpandError::Missing {
                    name: (*name).to_owned(),
                    reference: (*raw).to_owned(),
                }),
            },
        }
    }
}

struct Parser<'a> {
    s: &'a str,
    /// Byte offset; only ever moved across ASCII bytes, so it stays on a char boundary.
    pos: usize,
    /// How many `:-` defaults enclose the current position.
    depth: usize,
}

impl<'a> Parser<'a> {
    /// Reads pieces until the end of input or, inside a default, until an unmatched `}` (which
    /// is left for the caller to consume).
    fn sequence(&mut self, in_default: bool) -> Result<Vec<Piece<'a>>, ExpandError> {
        let bytes = self.s.as_bytes();
        let mut pieces = Vec::new();
        let mut lit_start = self.pos;
        while self.pos < bytes.len() {
            match bytes[self.pos] {
                b'}' if in_default => break,
                b'$' => {
                    if lit_start < self.pos {
                        pieces.push(Piece::Lit(&self.s[lit_start..self.pos]));
                    }
                    match bytes.get(self.pos + 1) {
                        Some(b'$') => {
                            pieces.push(Piece::Lit("$"));
                            self.pos += 2;
                        }
                        Some(b'{') => pieces.push(self.reference()?),
                        _ => {
                            pieces.push(Piece::Lit("$"));
                            self.pos += 1;
                        }
                    }
                    lit_start = self.pos;
                }
                _ => self.pos += 1,
            }
        }
        if lit_start < self.pos {
            pieces.push(Piece::Lit(&self.s[lit_start..self.pos]));
        }
        Ok(pieces)
    }

    /// Parses `${...}` starting at `self.pos` (which points at the `$`).
    fn reference(&mut self) -> Result<Piece<'a>, ExpandError> {
        let bytes = self.s.as_bytes();
        let start = self.pos;
        let s = self.s;
        let unterminated = move || ExpandError::Unterminated {
            at: s[..start].chars().count() + 1,
        };
        let name_start = start + 2;
        let mut end = name_start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let name = &self.s[name_start..end];
        let name_ok = name
            .as_bytes()
            .first()
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
        match bytes.get(end) {
            Some(b'}') => {
                self.pos = end + 1;
                let raw = &self.s[start..self.pos];
                if !name_ok {
                    return Err(ExpandError::BadName {
                        reference: raw.to_owned(),
                    });
                }
                Ok(Piece::Var {
                    name,
                    default: None,
                    raw,
                })
            }
            Some(b':') if bytes.get(end + 1) == Some(&b'-') => {
                if self.depth >= MAX_NESTING {
                    return Err(ExpandError::TooDeep {
                        at: s[..start].chars().count() + 1,
                    });
                }
                self.pos = end + 2;
                self.depth += 1;
                let default = self.sequence(true);
                self.depth -= 1;
                let default = default?;
                if bytes.get(self.pos) != Some(&b'}') {
                    return Err(unterminated());
                }
                self.pos += 1;
                let raw = &self.s[start..self.pos];
                if !name_ok {
                    return Err(ExpandError::BadName {
                        reference: raw.to_owned(),
                    });
                }
                Ok(Piece::Var {
                    name,
                    default: Some(default),
                    raw,
                })
            }
            None => Err(unterminated()),
            Some(_) => {
                // Quote the whole bad reference back if it is closed; a name is not a secret.
                match self.s[start..].find('}') {
                    Some(offset) => Err(ExpandError::BadName {
                        reference: self.s[start..start + offset + 1].to_owned(),
                    }),
                    None => Err(unterminated()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn run(input: &str) -> Result<String, Vec<ExpandError>> {
        let env = env_of(&[("HOME", "/home/u"), ("EMPTY", ""), ("TOKEN", "t$k${X}")]);
        expand(input, &env, false)
    }

    #[test]
    fn nested_defaults_are_bounded_before_they_exhaust_the_stack() {
        let nested = |levels: usize| format!("{}x{}", "${A:-".repeat(levels), "}".repeat(levels));
        assert_eq!(run(&nested(MAX_NESTING)).unwrap(), "x");
        let error = run(&nested(MAX_NESTING + 1)).unwrap_err();
        let at = MAX_NESTING * "${A:-".len() + 1;
        assert_eq!(error, vec![ExpandError::TooDeep { at }]);
        assert!(error[0].to_string().contains("nest more than 16 deep"));
        // What crashed loom at start before the bound: 100,000 levels.
        assert!(matches!(
            run(&nested(100_000)).unwrap_err()[0],
            ExpandError::TooDeep { .. }
        ));
    }

    #[test]
    fn plain_strings_pass_through() {
        assert_eq!(run("hello world").unwrap(), "hello world");
        assert_eq!(run("").unwrap(), "");
        assert_eq!(run("ünïcødé }").unwrap(), "ünïcødé }");
    }

    #[test]
    fn substitutes_variables_anywhere_in_the_string() {
        assert_eq!(run("${HOME}").unwrap(), "/home/u");
        assert_eq!(
            run("dir=${HOME}/x and ${HOME}").unwrap(),
            "dir=/home/u/x and /home/u"
        );
    }

    #[test]
    fn substituted_values_are_not_expanded_again() {
        assert_eq!(run("${TOKEN}").unwrap(), "t$k${X}");
    }

    #[test]
    fn default_applies_when_unset_or_empty() {
        assert_eq!(run("${NOPE:-fallback}").unwrap(), "fallback");
        assert_eq!(run("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(run("${HOME:-fallback}").unwrap(), "/home/u");
        assert_eq!(run("${NOPE:-}").unwrap(), "");
        assert_eq!(run("${NOPE:-a:b-c}").unwrap(), "a:b-c");
    }

    #[test]
    fn set_but_empty_without_default_is_empty() {
        assert_eq!(run("[${EMPTY}]").unwrap(), "[]");
    }

    #[test]
    fn defaults_may_nest_and_are_only_expanded_when_used() {
        assert_eq!(run("${NOPE:-${HOME}/x}").unwrap(), "/home/u/x");
        assert_eq!(run("${HOME:-${MISSING}}").unwrap(), "/home/u");
        assert_eq!(run("${NOPE:-${ALSO_NOPE:-deep}}").unwrap(), "deep");
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        assert_eq!(run("$$").unwrap(), "$");
        assert_eq!(run("$${HOME}").unwrap(), "${HOME}");
        assert_eq!(run("a$$$$b").unwrap(), "a$$b");
    }

    #[test]
    fn lone_dollar_stays_literal() {
        assert_eq!(run("$HOME").unwrap(), "$HOME");
        assert_eq!(run("costs $5").unwrap(), "costs $5");
        assert_eq!(run("end$").unwrap(), "end$");
    }

    #[test]
    fn missing_variable_is_reported_with_its_reference() {
        let errs = run("Bearer ${GITHUB_TOKEN}").unwrap_err();
        assert_eq!(
            errs,
            vec![ExpandError::Missing {
                name: "GITHUB_TOKEN".into(),
                reference: "${GITHUB_TOKEN}".into()
            }]
        );
        assert_eq!(
            errs[0].to_string(),
            "environment variable `GITHUB_TOKEN` is not set (referenced as ${GITHUB_TOKEN})"
        );
    }

    #[test]
    fn every_missing_variable_is_reported() {
        let errs = run("${A}-${B}-${HOME}").unwrap_err();
        assert_eq!(errs.len(), 2);
    }

    #[test]
    fn keep_missing_leaves_the_reference_as_written() {
        let env = env_of(&[]);
        assert_eq!(expand("x ${A} y", &env, true).unwrap(), "x ${A} y");
        assert_eq!(expand("${A:-d}", &env, true).unwrap(), "d");
    }

    #[test]
    fn unterminated_reference_is_an_error() {
        for input in ["${HOME", "abc ${", "${A:-x", "${A:-${B}"] {
            let errs = run(input).unwrap_err();
            assert!(
                matches!(errs[..], [ExpandError::Unterminated { .. }]),
                "{input}: {errs:?}"
            );
        }
        let errs = run("ab${X").unwrap_err();
        assert_eq!(errs, vec![ExpandError::Unterminated { at: 3 }]);
        assert!(errs[0].to_string().contains("unterminated"));
    }

    #[test]
    fn bad_names_are_errors() {
        for input in ["${}", "${1A}", "${A B}", "${A-x}", "${:-x}"] {
            let errs = run(input).unwrap_err();
            assert!(
                matches!(errs[..], [ExpandError::BadName { .. }]),
                "{input}: {errs:?}"
            );
        }
        let errs = run("${A B}").unwrap_err();
        assert!(errs[0].to_string().contains("`${A B}`"));
    }
}
