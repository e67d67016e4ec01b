//! Logins whose redirect comes to loom's HTTP face (`GET /oauth/callback`, SPEC §4.7): a person
//! behind a remote client cannot reach this machine's loopback, so a login started for a
//! subject of the HTTP face sends the browser back to loom's own URL, and the request is handed
//! to the login that sent that `state`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

/// The path of the redirect on loom's HTTP face.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// At most this many logins wait for their redirect at once (each holds a few hundred bytes
/// and a 300 s timer; a client cannot start more than one per server and subject).
const MAX_WAITING: usize = 4_096;

/// The logins waiting for their redirect, by the `state` each sent.
#[derive(Default)]
pub(crate) struct Redirects {
    waiting: Mutex<HashMap<String, mpsc::Sender<String>>>,
}

/// Why a redirect was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// The query has no `state`.
    NoState,
    /// No login waits for that `state` (it finished, timed out, or never was).
    Unknown,
}

impl Redirects {
    /// A login that sent `state` waits for its redirect; the query of the redirect arrives on
    /// the receiver (dropped: the login no longer waits). `None` when too many wait already.
    pub(crate) fn expect(&self, state: &str) -> Option<mpsc::Receiver<String>> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.retain(|_, sender| !sender.is_closed());
        if waiting.len() >= MAX_WAITING {
            return None;
        }
        let (sender, receiver) = mpsc::channel(1);
        waiting.insert(state.to_owned(), sender);
        Some(receiver)
    }

    /// Hands the redirect's `query` to the login that sent its `state` (once: a second visit
    /// finds nobody).
    pub(crate) fn deliver(&self, query: &str) -> Result<(), Undelivered> {
        let state = query_value(query, "state").ok_or(Undelivered::NoState)?;
        let sender = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&state)
            .ok_or(Undelivered::Unknown)?;
        sender
            .try_send(query.to_owned())
            .map_err(|_| Undelivered::Unknown)
    }
}

/// The value of `key` in a URL query, decoded.
pub(crate) fn query_value(query: &str, key: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://127.0.0.1/?{query}")).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_redirect_reaches_the_login_that_sent_its_state_once() {
        let redirects = Redirects::default();
        let mut first = redirects.expect("s1").unwrap();
        let _second = redirects.expect("s2").unwrap();
        assert_eq!(redirects.deliver("code=c&state=s1"), Ok(()));
        assert_eq!(first.recv().await.as_deref(), Some("code=c&state=s1"));
        assert_eq!(
            redirects.deliver("code=c&state=s1"),
            Err(Undelivered::Unknown)
        );
        assert_eq!(redirects.deliver("code=c"), Err(Undelivered::NoState));
        assert_eq!(
            redirects.deliver("code=c&state=forged"),
            Err(Undelivered::Unknown)
        );
    }

    #[test]
    fn a_login_that_stopped_waiting_is_forgotten() {
        let redirects = Redirects::default();
        drop(redirects.expect("gone").unwrap());
        assert_eq!(
            redirects.deliver("code=c&state=gone"),
            Err(Undelivered::Unknown)
        );
    }
}
