//! What one instance holds in memory that a request to another may concern (SPEC §25
//! "Calls that wait, and tasks"): a call waiting for its client's input (`requestState`) and a
//! task of the 2026-07-28 tasks extension. Neither can move — the server's open request lives
//! on this instance's connection — so the others must find the instance that holds it:
//!
//! - a `requestState` is **sealed** (AES-256-GCM under a key derived from the cluster secret):
//!   it names its instance, scope, call and expiry, so any instance can read where it goes and
//!   nobody without the secret can forge or alter one;
//! - a task's id is the server's own: its instance is recorded in the store under the scope
//!   (`tasks/<digest>.json`) before the answer that names it;
//! - every instance that serves HTTP writes `instances/<id>.json` with the URL the others reach
//!   it at.
//!
//! A state answers one retry in the whole cluster: whoever takes it up (its instance, or another
//! one when its instance is gone) first creates `scope=S/states/<key>` — a create that fails if
//! it exists.

use std::collections::HashMap;
use std::sync::PoisonError;

use object_store::{ObjectStoreExt as _, PutPayload};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Cluster;
use crate::snapshot::child;

/// What every sealed state begins with (and the version of what follows).
const SEALED_PREFIX: &str = "loom1.";

/// Bytes of an AES-GCM nonce.
const NONCE_BYTES: usize = 12;

/// The longest sealed state loom opens (its own are a few hundred bytes).
const MAX_SEALED_CHARS: usize = 2048;

/// Instance URLs remembered at most (ids of instances long gone stay in the store).
const MAX_REMEMBERED: usize = 1024;

/// What a sealed `requestState` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedState {
    /// The instance that holds the waiting call.
    #[serde(rename = "i")]
    pub instance: String,
    /// The scope folder of the credential it was given to.
    #[serde(rename = "s")]
    pub scope: String,
    /// Unique per state: the key of its claim, and of the call in its instance's table.
    #[serde(rename = "k")]
    pub key: String,
    /// [`call_digest`] of the call it continues.
    #[serde(rename = "c")]
    pub call: String,
    /// Seconds since the epoch after which nobody takes it up.
    #[serde(rename = "e")]
    pub expires: u64,
}

/// One instance as the store lists it (`instances/<id>.json`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstanceFile {
    url: String,
    loom_version: String,
    started_at: String,
}

/// Which instance a task of the tasks extension was created on (`scope=S/tasks/<d>.json`).
#[derive(Debug, Serialize, Deserialize)]
struct TaskFile {
    instance: String,
}

/// The digest a sealed state names its call by: method, exposed target and arguments (members
/// in any order: a client may write them otherwise on its retry).
pub fn call_digest(method: &str, target: &str, arguments: Option<&Value>) -> String {
    let arguments = arguments.map(canonical).unwrap_or_default();
    let mut text = String::with_capacity(method.len() + target.len() + arguments.len() + 2);
    text.push_str(method);
    text.push('\0');
    text.push_str(target);
    text.push('\0');
    text.push_str(&arguments);
    crate::token::digest_hex("loom/call", text.as_bytes())
}

/// `value` as JSON text with every object's members sorted.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                members.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// Whether `text` has the shape of a sealed state (it may still be forged).
pub fn looks_sealed(text: &str) -> bool {
    text.starts_with(SEALED_PREFIX)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl SealedState {
    /// Whether its time is over.
    pub fn expired(&self) -> bool {
        now_secs() > self.expires
    }
}

/// The AES-256-GCM key of sealed states: an HMAC of a fixed text under the cluster secret.
pub(super) fn state_key(secret: &[u8]) -> Option<LessSafeKey> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let derived = ring::hmac::sign(&key, b"loom/request-state\0aes-256-gcm");
    UnboundKey::new(&AES_256_GCM, derived.as_ref())
        .ok()
        .map(LessSafeKey::new)
}

impl Cluster {
    /// This process's id among the instances (random, new at every start).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// A sealed `requestState` for a call of `scope` described by `call` ([`call_digest`]),
    /// good for `lifetime`. `None` without randomness.
    pub fn seal_state(
        &self,
        scope: &str,
        call: &str,
        lifetime: std::time::Duration,
    ) -> Option<String> {
        let state = SealedState {
            instance: self.instance.clone(),
            scope: scope.to_string(),
            key: crate::token::random_hex()?,
            call: call.to_string(),
            expires: now_secs().saturating_add(lifetime.as_secs()),
        };
        let mut sealed = serde_json::to_vec(&state).ok()?;
        let mut nonce = [0u8; NONCE_BYTES];
        SystemRandom::new().fill(&mut nonce).ok()?;
        self.state_key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(SEALED_PREFIX.as_bytes()),
                &mut sealed,
            )
            .ok()?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        use base64::Engine as _;
        Some(format!(
            "{SEALED_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        ))
    }

    /// What a sealed state says, if this cluster's secret sealed it unaltered. Expired states
    /// open too (the caller says why it refuses them).
    pub fn open_state(&self, text: &str) -> Option<SealedState> {
        use base64::Engine as _;
        if text.len() > MAX_SEALED_CHARS {
            return None;
        }
        let encoded = text.strip_prefix(SEALED_PREFIX)?;
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .ok()?;
        if bytes.len() <= NONCE_BYTES {
            return None;
        }
        let mut sealed = bytes.split_off(NONCE_BYTES);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).ok()?;
        let plain = self
            .state_key
            .open_in_place(nonce, Aad::from(SEALED_PREFIX.as_bytes()), &mut sealed)
            .ok()?;
        serde_json::from_slice(plain).ok()
    }

    /// Take up the state keyed `key` of `scope`: `Ok(false)` if some instance took it up before.
    pub async fn claim_state(&self, scope: &str, key: &str) -> Result<bool, String> {
        self.create(&self.path(scope, &["states", key])).await
    }

    /// Say where this instance is reached (`loom serve --http` with a URL to give).
    pub async fn register(&self, url: &str) -> Result<(), String> {
        let file = InstanceFile {
            url: url.to_string(),
            loom_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: crate::common::text::now_rfc3339(),
        };
        let body = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        let path = child(
            &self.location.root,
            &["instances", &format!("{}.json", self.instance)],
        );
        self.location
            .store
            .put(&path, PutPayload::from(body))
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        self.remember(&self.instance, url);
        Ok(())
    }

    /// Forget this instance's entry (a clean shutdown): nobody forwards to it any more.
    pub async fn unregister(&self) {
        let path = child(
            &self.location.root,
            &["instances", &format!("{}.json", self.instance)],
        );
        let _ = self.location.store.delete(&path).await;
    }

    fn remember(&self, instance: &str, url: &str) {
        let mut urls = self.urls.lock().unwrap_or_else(PoisonError::into_inner);
        if urls.len() >= MAX_REMEMBERED {
            urls.clear();
        }
        urls.insert(instance.to_string(), url.to_string());
    }

    /// The URL instance `instance` said it is reached at; `None` when it never said (it serves
    /// no HTTP, had nothing to give, or its entry is gone).
    pub async fn instance_url(&self, instance: &str) -> Result<Option<String>, String> {
        if let Some(url) = self
            .urls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(instance)
        {
            return Ok(Some(url.clone()));
        }
        if !is_instance_id(instance) {
            return Ok(None);
        }
        let path = child(
            &self.location.root,
            &["instances", &format!("{instance}.json")],
        );
        let Some(bytes) = self.read(&path).await? else {
            return Ok(None);
        };
        let file: InstanceFile = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the store's entry of instance {instance} does not read: {e}"))?;
        self.remember(instance, &file.url);
        Ok(Some(file.url))
    }

    /// Record that task `task` of `scope` lives on this instance.
    pub async fn record_task(&self, scope: &str, task: &str) -> Result<(), String> {
        let body = serde_json::to_vec(&TaskFile {
            instance: self.instance.clone(),
        })
        .map_err(|e| e.to_string())?;
        self.location
            .store
            .put(&self.task_path(scope, task), PutPayload::from(body))
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        Ok(())
    }

    /// The instance task `task` of `scope` was created on, if the store knows it.
    pub async fn task_instance(&self, scope: &str, task: &str) -> Result<Option<String>, String> {
        let Some(bytes) = self.read(&self.task_path(scope, task)).await? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<TaskFile>(&bytes)
            .ok()
            .map(|file| file.instance))
    }

    /// A task id is the server's, any text: its object is named by a digest of it.
    fn task_path(&self, scope: &str, task: &str) -> object_store::path::Path {
        let digest = crate::token::digest_hex("loom/task", task.as_bytes());
        self.path(scope, &["tasks", &format!("{}.json", &digest[..32])])
    }
}

/// An instance id has the shape loom gives them (32 hex digits): anything else is not looked up.
fn is_instance_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new instance id.
pub(super) fn new_instance_id() -> String {
    crate::token::random_hex().unwrap_or_else(|| {
        // No randomness: the process id and the time still tell instances apart.
        let mixed = format!("{}-{}", std::process::id(), now_secs());
        crate::token::digest_hex("loom/instance", mixed.as_bytes())[..32].to_string()
    })
}

/// Remembered instance URLs.
pub(super) type Urls = std::sync::Mutex<HashMap<String, String>>;
