//! What one session wants to hear of resources: the URIs its `initialize`-era client subscribed
//! to and the `subscriptions/listen` streams of a 2026-07-28 client. Whether a server is asked
//! is the hub's count over every session; this is the session's own part of it.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rmcp::service::SubscriptionSink;

/// `subscriptions/listen` streams one session (over HTTP: one credential's scope) may hold open.
pub const MAX_LISTENERS: usize = 32;

#[derive(Default)]
pub(super) struct Subscriptions {
    /// Resource URIs this session subscribed to: only their updates reach its client.
    uris: Mutex<HashSet<String>>,
    /// The client's listen streams, and how many of them want each resource URI.
    listeners: Mutex<Listeners>,
}

#[derive(Default)]
struct Listeners {
    next: u64,
    sinks: Vec<(u64, SubscriptionSink)>,
    uris: HashMap<String, usize>,
}

impl Subscriptions {
    fn lock_uris(&self) -> MutexGuard<'_, HashSet<String>> {
        self.uris.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_listeners(&self) -> MutexGuard<'_, Listeners> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// True when this session had not subscribed to `uri` before.
    pub(super) fn subscribe(&self, uri: &str) -> bool {
        self.lock_uris().insert(uri.to_string())
    }

    /// True when this session had subscribed to `uri`.
    pub(super) fn unsubscribe(&self, uri: &str) -> bool {
        self.lock_uris().remove(uri)
    }

    pub(super) fn is_subscribed(&self, uri: &str) -> bool {
        self.lock_uris().contains(uri)
    }

    /// Every URI subscribed to, given up (the session ends).
    pub(super) fn drain(&self) -> Vec<String> {
        self.lock_uris().drain().collect()
    }

    /// A listen stream opened; its number (`None` beyond [`MAX_LISTENERS`]).
    pub(super) fn add_listener(&self, sink: SubscriptionSink) -> Option<u64> {
        let mut listeners = self.lock_listeners();
        if listeners.sinks.len() >= MAX_LISTENERS {
            return None;
        }
        listeners.next += 1;
        let number = listeners.next;
        listeners.sinks.push((number, sink));
        Some(number)
    }

    pub(super) fn remove_listener(&self, number: u64) {
        self.lock_listeners().sinks.retain(|(n, _)| *n != number);
    }

    /// One more listen stream wants `uri`; true when none of this session's did before.
    pub(super) fn listen_to(&self, uri: &str) -> bool {
        let mut listeners = self.lock_listeners();
        let count = listeners.uris.entry(uri.to_string()).or_default();
        *count += 1;
        *count == 1
    }

    /// One listen stream fewer wants `uri`; true when it was the last of this session's.
    pub(super) fn stop_listening_to(&self, uri: &str) -> bool {
        let mut listeners = self.lock_listeners();
        match listeners.uris.get_mut(uri) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                listeners.uris.remove(uri);
                true
            }
            None => false,
        }
    }

    /// The listen streams open now.
    pub(super) fn sinks(&self) -> Vec<SubscriptionSink> {
        self.lock_listeners()
            .sinks
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect()
    }
}
