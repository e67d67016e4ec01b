//! What went wrong with a snapshot store, in words a user can act on. object_store reports S3
//! failures as one generic error whose text holds the HTTP status and the XML error body; the
//! kinds below are read from that text. Every message is scrubbed of the AWS secrets in the
//! environment, whatever the store quoted.

use super::Location;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FailureKind {
    NoSuchBucket,
    AccessDenied,
    BadCredentials,
    Unreachable,
    TimedOut,
    NotFound,
    Other,
}

impl FailureKind {
    pub(crate) fn of(error: &str) -> Self {
        let code = |c: &str| error.contains(&format!("<Code>{c}</Code>"));
        if code("NoSuchBucket") {
            FailureKind::NoSuchBucket
        } else if code("InvalidAccessKeyId")
            || code("SignatureDoesNotMatch")
            || code("InvalidToken")
            || code("ExpiredToken")
        {
            FailureKind::BadCredentials
        } else if code("AccessDenied") || error.contains("403 Forbidden") {
            FailureKind::AccessDenied
        } else if error.contains("timed out") || error.contains("deadline has elapsed") {
            // Before "unreachable": reqwest reports a timeout as "error sending request" too.
            FailureKind::TimedOut
        } else if error.contains("error sending request")
            || error.contains("Connection refused")
            || error.contains("dns error")
        {
            FailureKind::Unreachable
        } else if code("NoSuchKey") || error.contains("not found") || error.contains("NotFound") {
            FailureKind::NotFound
        } else {
            FailureKind::Other
        }
    }
}

/// `doing` (e.g. `cannot list`) failed at `location`: the kind and a message naming what to fix.
pub(crate) fn explain(
    location: &Location,
    doing: &str,
    error: &dyn std::fmt::Display,
) -> (FailureKind, String) {
    let text = super::scrub(&error.to_string());
    let kind = FailureKind::of(&text);
    let root = &location.url_base;
    let at = location
        .endpoint
        .as_deref()
        .map(|e| format!(" at {e}"))
        .unwrap_or_default();
    let bucket = root
        .strip_prefix("s3://")
        .map(|rest| rest.split('/').next().unwrap_or(rest))
        .unwrap_or(root);
    let message = match kind {
        FailureKind::NoSuchBucket => format!(
            "{doing} {root}: no such bucket `{bucket}`{at} (create it, or check the name and AWS_ENDPOINT_URL)"
        ),
        FailureKind::BadCredentials => format!(
            "{doing} {root}: the store refused the credentials{at} (check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN)"
        ),
        FailureKind::AccessDenied => format!(
            "{doing} {root}: access denied{at} (the credentials are valid but may not use this bucket or prefix)"
        ),
        FailureKind::Unreachable => format!(
            "{doing} {root}: cannot reach the store{at} (is it running, and is AWS_ENDPOINT_URL right?)"
        ),
        FailureKind::TimedOut => format!("{doing} {root}: the store did not answer in time{at}"),
        FailureKind::NotFound | FailureKind::Other => format!("{doing} {root}: {text}"),
    };
    (kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_read_from_what_object_store_says() {
        let cases = [
            (
                "Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchBucket</Code></Error>",
                FailureKind::NoSuchBucket,
            ),
            (
                "403 Forbidden: <Error><Code>InvalidAccessKeyId</Code></Error>",
                FailureKind::BadCredentials,
            ),
            (
                "403 Forbidden: <Error><Code>SignatureDoesNotMatch</Code></Error>",
                FailureKind::BadCredentials,
            ),
            (
                "403 Forbidden: <Error><Code>AccessDenied</Code></Error>",
                FailureKind::AccessDenied,
            ),
            (
                "Error performing GET http://127.0.0.1:1/b in 623ms, after 3 retries - HTTP error: error sending request",
                FailureKind::Unreachable,
            ),
            ("Object at location x not found: 404", FailureKind::NotFound),
            (
                "HTTP error: error sending request: operation timed out",
                FailureKind::TimedOut,
            ),
            ("something else", FailureKind::Other),
        ];
        for (text, kind) in cases {
            assert_eq!(FailureKind::of(text), kind, "{text}");
        }
    }
}
