//! What one instance holds in memory that a request to another may concern (SPEC §25
//! "Calls that wait, and tasks"): a call waiting for its client's input (`requestState`) and a
//! task of the 2026-07-28 tasks extension. Neither can move — the server's open request lives
//! on this instance's connection — so the others must find the instance that holds it:
//!
//! - a `requestState` is **sealed** (AES-256-GCM under a key derived from the cluster secret):
//!   it names its instance, scope, call and expiry, so any instance can read where it goes and
//!   nobody without the secret can forge or alter one;
//! - a task's id is the server's own: its instance is recorded in the store under the scope
//!   (`tasks/<digest>.sealed`) before the answer that names it; a subject's login waiting for its
//!   browser likewise (`callbacks/<hmac of its state>.sealed`);
//! - every instance that serves HTTP writes `instances/<id>.sealed` with the URL the others
//!   reach it at, and a request forwarded there carries a header sealed for that instance.
//!
//! Every record is sealed (AES-256-GCM under the cluster's key): only an instance of the secret
//! can say where a client's credentials are forwarded. Subjects' logins are shared sealed too
//! ([`SharedLoginStore`]).
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

/// Which instance holds a task of the tasks extension (`scope=S/tasks/<d>.sealed`), or a login
/// waiting for its browser (`callbacks/<d>.sealed`).
#[derive(Debug, Serialize, Deserialize)]
struct Record {
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
        let bytes = self.seal_bytes(SEALED_PREFIX, serde_json::to_vec(&state).ok()?)?;
        use base64::Engine as _;
        Some(format!(
            "{SEALED_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        ))
    }

    /// `plain` encrypted and authenticated under the cluster's key, for `context` (the same
    /// bytes sealed for another context do not open): a random nonce, then the ciphertext.
    fn seal_bytes(&self, context: &str, mut plain: Vec<u8>) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_BYTES];
        SystemRandom::new().fill(&mut nonce).ok()?;
        self.state_key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut plain,
            )
            .ok()?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&plain);
        Some(bytes)
    }

    /// What [`Self::seal_bytes`] sealed for `context`, if nobody altered it.
    fn open_bytes(&self, context: &str, mut bytes: Vec<u8>) -> Option<Vec<u8>> {
        if bytes.len() <= NONCE_BYTES {
            return None;
        }
        let mut sealed = bytes.split_off(NONCE_BYTES);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).ok()?;
        let plain = self
            .state_key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut sealed)
            .ok()?;
        Some(plain.to_vec())
    }

    /// What a sealed state says, if this cluster's secret sealed it unaltered. Expired states
    /// open too (the caller says why it refuses them).
    pub fn open_state(&self, text: &str) -> Option<SealedState> {
        use base64::Engine as _;
        if text.len() > MAX_SEALED_CHARS {
            return None;
        }
        let encoded = text.strip_prefix(SEALED_PREFIX)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .ok()?;
        serde_json::from_slice(&self.open_bytes(SEALED_PREFIX, bytes)?).ok()
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
        let body = serde_json::to_vec(&file).map_err(|e| e.to_string())?;
        // Sealed: only an instance of the secret can say where an instance is (the others
        // forward clients' credentials there).
        let body = self
            .seal_bytes(INSTANCE_CONTEXT, body)
            .ok_or("no randomness to seal this instance's entry")?;
        let path = self.instance_path(&self.instance);
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
        let _ = self
            .location
            .store
            .delete(&self.instance_path(&self.instance))
            .await;
    }

    fn instance_path(&self, instance: &str) -> object_store::path::Path {
        child(
            &self.location.root,
            &["instances", &format!("{instance}.sealed")],
        )
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
        let Some(bytes) = self.read(&self.instance_path(instance)).await? else {
            return Ok(None);
        };
        let file: InstanceFile = self
            .open_bytes(INSTANCE_CONTEXT, bytes.to_vec())
            .and_then(|plain| serde_json::from_slice(&plain).ok())
            .ok_or_else(|| {
                format!(
                    "the store's entry of instance {instance} was not sealed with this cluster's \
                     secret"
                )
            })?;
        self.remember(instance, &file.url);
        Ok(Some(file.url))
    }

    /// Record that task `task` of `scope` lives on this instance.
    pub async fn record_task(&self, scope: &str, task: &str) -> Result<(), String> {
        self.record_here(&self.task_path(scope, task)).await
    }

    /// The instance task `task` of `scope` was created on, if the store knows it.
    pub async fn task_instance(&self, scope: &str, task: &str) -> Result<Option<String>, String> {
        self.recorded(&self.task_path(scope, task)).await
    }

    /// A task id is the server's, any text: its object is named by a digest of it.
    fn task_path(&self, scope: &str, task: &str) -> object_store::path::Path {
        let digest = crate::token::digest_hex("loom/task", task.as_bytes());
        self.path(scope, &["tasks", &format!("{}.sealed", &digest[..32])])
    }

    /// Record that the login that sent OAuth `state` waits for its browser on this instance
    /// (the browser may come back to any instance, SPEC §25).
    pub async fn record_login(&self, state: &str) -> Result<(), String> {
        self.record_here(&self.login_path(state)).await
    }

    /// The instance whose login sent `state`, if the store knows it.
    pub async fn login_instance(&self, state: &str) -> Result<Option<String>, String> {
        self.recorded(&self.login_path(state)).await
    }

    /// A redirect carries no credential: its login is named by a digest of its state alone.
    fn login_path(&self, state: &str) -> object_store::path::Path {
        let digest = crate::token::keyed_hex(&self.secret, "loom/login-state", state.as_bytes());
        child(
            &self.location.root,
            &["callbacks", &format!("{}.sealed", &digest[..32])],
        )
    }

    async fn record_here(&self, path: &object_store::path::Path) -> Result<(), String> {
        let body = serde_json::to_vec(&Record {
            instance: self.instance.clone(),
        })
        .map_err(|e| e.to_string())?;
        let body = self
            .seal_bytes(RECORD_CONTEXT, body)
            .ok_or("no randomness to seal a record")?;
        self.location
            .store
            .put(path, PutPayload::from(body))
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        Ok(())
    }

    async fn recorded(&self, path: &object_store::path::Path) -> Result<Option<String>, String> {
        let Some(bytes) = self.read(path).await? else {
            return Ok(None);
        };
        Ok(self
            .open_bytes(RECORD_CONTEXT, bytes.to_vec())
            .and_then(|plain| serde_json::from_slice::<Record>(&plain).ok())
            .map(|file| file.instance))
    }

    /// Whether the object at `path` was written longer than `age` ago (false when unknown).
    async fn older_than(&self, path: &object_store::path::Path, age: std::time::Duration) -> bool {
        let Ok(meta) = self.location.store.head(path).await else {
            return false;
        };
        let written: std::time::SystemTime = meta.last_modified.into();
        written.elapsed().is_ok_and(|elapsed| elapsed > age)
    }

    /// Where a subject's login file is shared (`suffix`: `sealed`, or `lock` for its refresh
    /// lock), named by an HMAC of the file's name: the store's readers cannot test whether a
    /// subject has a login to a server.
    fn shared_login_path(&self, name: &str, suffix: &str) -> object_store::path::Path {
        let digest = crate::token::keyed_hex(&self.secret, "loom/login-file", name.as_bytes());
        child(
            &self.location.root,
            &["logins", &format!("{}.{suffix}", &digest[..32])],
        )
    }

    /// The value of the `Loom-Forwarded` header of a request forwarded to instance `to`: sealed,
    /// so the instance that gets it can tell it was meant for it (and not for a process that
    /// was at its address before).
    pub fn forwarding_token(&self, to: &str) -> Option<String> {
        let plain = serde_json::to_vec(&Forwarded {
            to: to.to_string(),
            expires: now_secs().saturating_add(FORWARDED_LIFETIME),
        })
        .ok()?;
        use base64::Engine as _;
        Some(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(self.seal_bytes(FORWARDED_CONTEXT, plain)?),
        )
    }

    /// Whether a `Loom-Forwarded` header is one an instance of this cluster sent to this one.
    pub fn forwarded_here(&self, token: &str) -> bool {
        use base64::Engine as _;
        if token.len() > MAX_SEALED_CHARS {
            return false;
        }
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()
            .and_then(|bytes| self.open_bytes(FORWARDED_CONTEXT, bytes))
            .and_then(|plain| serde_json::from_slice::<Forwarded>(&plain).ok())
            .is_some_and(|forwarded| {
                forwarded.to == self.instance && now_secs() <= forwarded.expires
            })
    }
}

/// The subjects' logins of the HTTP face, shared through the cluster's store (SPEC §25),
/// sealed under the cluster's key: the store's readers learn nothing of the tokens.
pub struct SharedLoginStore(pub std::sync::Arc<Cluster>);

/// What sealed login files are sealed for.
const LOGIN_CONTEXT: &str = "loom/login-file";
/// What an instance's entry is sealed for.
const INSTANCE_CONTEXT: &str = "loom/instance";
/// What a task's or a login's record is sealed for.
const RECORD_CONTEXT: &str = "loom/record";
/// What a forwarded request's header is sealed for.
const FORWARDED_CONTEXT: &str = "loom/forwarded";
/// Seconds a forwarded request's header is good for (it is sent at once).
const FORWARDED_LIFETIME: u64 = 60;

/// A forwarded request's header: the instance it is meant for.
#[derive(Serialize, Deserialize)]
struct Forwarded {
    to: String,
    expires: u64,
}

#[async_trait::async_trait]
impl crate::downstream::oauth::store::SharedLogins for SharedLoginStore {
    async fn fetch(&self, name: &str) -> Option<String> {
        let path = self.0.shared_login_path(name, "sealed");
        let bytes = match self.0.read(&path).await {
            Ok(bytes) => bytes?,
            Err(error) => {
                tracing::debug!("a shared login cannot be read: {error}");
                return None;
            }
        };
        let plain = self.0.open_bytes(LOGIN_CONTEXT, bytes.to_vec())?;
        String::from_utf8(plain).ok()
    }

    async fn put(&self, name: &str, text: String) {
        let path = self.0.shared_login_path(name, "sealed");
        let Some(sealed) = self.0.seal_bytes(LOGIN_CONTEXT, text.into_bytes()) else {
            return;
        };
        if let Err(error) = self
            .0
            .location
            .store
            .put(&path, PutPayload::from(sealed))
            .await
        {
            let message = self.0.report("cannot write", &error);
            tracing::debug!("a login is not shared with the other instances: {message}");
        }
    }

    async fn delete(&self, name: &str) {
        let path = self.0.shared_login_path(name, "sealed");
        let _ = self.0.location.store.delete(&path).await;
    }

    async fn lock(&self, name: &str) -> Option<Box<dyn Send>> {
        let path = self.0.shared_login_path(name, "lock");
        let deadline = tokio::time::Instant::now() + LOGIN_LOCK_WAIT;
        loop {
            match self.0.create(&path).await {
                Ok(true) => {
                    return Some(Box::new(LoginLock {
                        cluster: self.0.clone(),
                        path,
                    }));
                }
                Ok(false) => {
                    // Held: by a refresh under way, or by an instance that died holding it
                    // (taken over once it is older than a refresh can take).
                    if self.0.older_than(&path, LOGIN_LOCK_STALE).await {
                        let _ = self.0.location.store.delete(&path).await;
                        continue;
                    }
                }
                Err(error) => {
                    tracing::debug!("a shared login's refresh goes on unlocked: {error}");
                    return None;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

/// How long a refresh waits for another instance's refresh of the same login.
const LOGIN_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A lock older than this is an instance's that died holding it.
const LOGIN_LOCK_STALE: std::time::Duration = std::time::Duration::from_secs(60);

/// A shared login held for a refresh: the lock object is deleted when it is dropped.
struct LoginLock {
    cluster: std::sync::Arc<Cluster>,
    path: object_store::path::Path,
}

impl Drop for LoginLock {
    fn drop(&mut self) {
        let cluster = self.cluster.clone();
        let path = std::mem::take(&mut self.path);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = cluster.location.store.delete(&path).await;
            });
        }
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
