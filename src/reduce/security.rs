//! Results that must never be shortened in silence: an error, or text that reports a denial,
//! a permission problem or a failed check (SPEC §19.2). They skip the reductions and are only
//! cut above a hard limit, with the marker.

use std::sync::LazyLock;

/// Only the head is looked at: a long log that mentions "forbidden" somewhere in its middle is
/// still a log, but a message that opens with a denial is that denial.
const HEAD_CHARS: usize = 2_000;

static DENIAL: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(permission denied|access denied|access is denied|forbidden|unauthori[sz]ed|not authori[sz]ed|not permitted|operation not permitted|authentication (failed|required)|invalid (credentials|token|api key)|blocked by (policy|the policy)|policy violation|security (warning|alert|violation)|requires? (approval|confirmation)|confirmation required|check(s)? failed|failed checks?|verification failed|EACCES|EPERM)\b",
    )
    .ok()
});

/// Whether `text` opens with a denial, a permission problem or a failed check.
pub(crate) fn looks_security_relevant(text: &str) -> bool {
    let end = text
        .char_indices()
        .nth(HEAD_CHARS)
        .map_or(text.len(), |(i, _)| i);
    DENIAL
        .as_ref()
        .is_some_and(|regex| regex.is_match(&text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_and_failed_checks_are_recognised_in_the_head_only() {
        for text in [
            "Error: EACCES: permission denied, open '/etc/shadow'",
            "HTTP 403 Forbidden\n<html>…",
            "The operation requires approval from an administrator.",
            "3 checks failed:\n- lint\n- test",
            "Unauthorized: invalid token",
        ] {
            assert!(looks_security_relevant(text), "{text}");
        }
        for text in [
            "2026-12-01 INFO request served in 3 ms",
            "# README\nThis project formats code.",
            "{\"items\": [1, 2, 3]}",
        ] {
            assert!(!looks_security_relevant(text), "{text}");
        }
        let late = format!("{}permission denied", "log line\n".repeat(500));
        assert!(
            !looks_security_relevant(&late),
            "a denial deep in a log is not the message"
        );
    }
}
