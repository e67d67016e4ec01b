//! Where a login is kept between runs (SPEC §4.7): one JSON file per remote server (and, on the
//! HTTP face, per loom subject) under `$XDG_STATE_HOME/loom/oauth/`, 0600 in a 0700 folder, and
//! the client ids loom registered with each authorization server, so a login does not register
//! a new client every time. A file that others can read, or that is not what loom wrote, is
//! refused with what to do about it; it is never used, never overwritten behind the user's back.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// What may read a token file or its folder besides its owner: nothing.
const GROUP_OR_OTHER: u32 = 0o077;

/// The folder logins are kept in: `$XDG_STATE_HOME/loom/oauth`, else
/// `~/.local/state/loom/oauth`. `None` when neither variable says where home is.
pub(crate) fn default_root(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let state = env("XDG_STATE_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".local/state"))
        })?;
    Some(state.join("loom").join("oauth"))
}

/// A problem with the folder or a file in it, in words that say how to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

impl From<StoreError> for AuthError {
    fn from(error: StoreError) -> Self {
        AuthError::CredentialStoreError(error.0)
    }
}

/// The logins folder.
#[derive(Clone)]
pub struct TokenStore {
    root: PathBuf,
    /// Where the subjects' logins are shared with other instances (a cluster's store, SPEC
    /// §25); the files here stay the working copy.
    shared: Option<std::sync::Arc<dyn SharedLogins>>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("root", &self.root)
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

/// Logins of the HTTP face's subjects shared between loom instances (SPEC §25): a login made on
/// one instance — its browser came back there — serves the subject on every instance. Named by
/// the login file's name; the text is the file's. Failures are the implementation's to report:
/// the local file stays the working copy.
#[async_trait::async_trait]
pub trait SharedLogins: Send + Sync {
    /// The login file `name` as the last instance wrote it, if there is one.
    async fn fetch(&self, name: &str) -> Option<String>;
    /// Keep `text` as login file `name`.
    async fn put(&self, name: &str, text: String);
    /// Forget login file `name`.
    async fn delete(&self, name: &str);
    /// Hold login `name` for one refresh across the instances (a server that rotates refresh
    /// tokens revokes the login when two use one); released when the guard is dropped. `None`
    /// when it could not be had in time (the refresh goes on without it).
    async fn lock(&self, name: &str) -> Option<Box<dyn Send>>;
}

/// One login as written to its file.
#[derive(Serialize, Deserialize)]
struct LoginFile {
    /// The server's MCP endpoint, as configured.
    url: String,
    /// The loom subject (`iss sub` of its client's token) on the HTTP face; none over stdio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    credentials: StoredCredentials,
    /// Scopes the server asked for beyond the granted ones (403 `insufficient_scope`): the
    /// next login asks for them too. Cleared by the login's own save.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wanted_scopes: Vec<String>,
}

/// A client loom registered (RFC 7591) with an authorization server, kept to be used again.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub issuer: String,
    pub client_id: String,
}

impl TokenStore {
    pub fn new(root: PathBuf) -> Self {
        TokenStore { root, shared: None }
    }

    /// The same folder, its subjects' logins shared through `shared`.
    pub fn sharing(self, shared: std::sync::Arc<dyn SharedLogins>) -> Self {
        TokenStore {
            shared: Some(shared),
            ..self
        }
    }

    /// The name a subject's login is shared under: its file's name. `None` for the machine's
    /// logins (each machine logs in for itself) and without sharing.
    fn shared_name(&self, url: &str, subject: Option<&str>) -> Option<(String, &dyn SharedLogins)> {
        subject?;
        let shared = self.shared.as_deref()?;
        let path = self.login_path(url, subject);
        let name = path.file_name()?.to_str()?.to_owned();
        Some((name, shared))
    }

    /// Take the shared copy of a subject's login when it is newer than the file here (another
    /// instance logged in or refreshed): true when the file changed. When the file here is the
    /// newer one (a share that failed), it is shared again instead.
    pub async fn pull_shared(&self, url: &str, subject: Option<&str>) -> bool {
        let Some((name, shared)) = self.shared_name(url, subject) else {
            return false;
        };
        let Some(text) = shared.fetch(&name).await else {
            return false;
        };
        let Ok(theirs) = serde_json::from_str::<LoginFile>(&text) else {
            return false;
        };
        // Only a login of this very server and subject (the name is a digest of both).
        if theirs.url != url || theirs.subject.as_deref() != subject {
            return false;
        }
        let mine = self.load_file(url, subject).ok().flatten();
        let received = |file: &LoginFile| {
            file.credentials
                .token_response
                .as_ref()
                .and(file.credentials.token_received_at)
        };
        match &mine {
            Some(mine)
                if serde_json::to_value(&mine.credentials).ok()
                    == serde_json::to_value(&theirs.credentials).ok() =>
            {
                false
            }
            // Tokens received later here than there: this copy is the one to share.
            Some(mine) if received(mine) > received(&theirs) => {
                self.push_shared(url, subject).await;
                false
            }
            _ => self.write_file(&theirs).is_ok(),
        }
    }

    /// Forget the shared copy of a subject's login if it holds `refused`'s tokens (a refresh
    /// token the authorization server refused: revoked, it must not come back from the store).
    async fn forget_shared_if(
        &self,
        url: &str,
        subject: Option<&str>,
        refused: &StoredCredentials,
    ) {
        let Some((name, shared)) = self.shared_name(url, subject) else {
            return;
        };
        let Some(theirs) = shared
            .fetch(&name)
            .await
            .and_then(|text| serde_json::from_str::<LoginFile>(&text).ok())
        else {
            return;
        };
        if serde_json::to_value(&theirs.credentials.token_response).ok()
            == serde_json::to_value(&refused.token_response).ok()
        {
            shared.delete(&name).await;
        }
    }

    /// Share the file of a subject's login as it is now (or that it is gone).
    async fn push_shared(&self, url: &str, subject: Option<&str>) {
        let Some((name, shared)) = self.shared_name(url, subject) else {
            return;
        };
        match read_private(&self.login_path(url, subject)) {
            Ok(Some(text)) => shared.put(&name, text).await,
            Ok(None) => shared.delete(&name).await,
            Err(_) => {}
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of the login to `url` for `subject`.
    pub fn login_path(&self, url: &str, subject: Option<&str>) -> PathBuf {
        let key = digest(&[url, subject.unwrap_or("")]);
        self.root.join(format!("{}-{key}.json", readable_host(url)))
    }

    fn registration_path(&self, issuer: &str) -> PathBuf {
        self.root
            .join("clients")
            .join(format!("{}.json", digest(&[issuer])))
    }

    /// The stored login to `url` for `subject`, if there is one.
    pub fn load(
        &self,
        url: &str,
        subject: Option<&str>,
    ) -> Result<Option<StoredCredentials>, StoreError> {
        Ok(self.load_file(url, subject)?.map(|file| file.credentials))
    }

    /// Scopes a server asked for beyond the granted ones, for the next login.
    pub fn wanted_scopes(&self, url: &str, subject: Option<&str>) -> Vec<String> {
        self.load_file(url, subject)
            .ok()
            .flatten()
            .map(|file| file.wanted_scopes)
            .unwrap_or_default()
    }

    /// The server wants `scopes` too (step-up): kept with the login, which stays as it is.
    pub fn want_scopes(
        &self,
        url: &str,
        subject: Option<&str>,
        scopes: &[String],
    ) -> Result<(), StoreError> {
        let Some(mut file) = self.load_file(url, subject)? else {
            return Ok(());
        };
        for scope in scopes {
            if !file.wanted_scopes.contains(scope) {
                file.wanted_scopes.push(scope.clone());
            }
        }
        self.write_file(&file)
    }

    fn load_file(&self, url: &str, subject: Option<&str>) -> Result<Option<LoginFile>, StoreError> {
        let path = self.login_path(url, subject);
        let Some(text) = read_private(&path)? else {
            return Ok(None);
        };
        let file: LoginFile = serde_json::from_str(&text).map_err(|e| {
            StoreError(format!(
                "{} is not a login file loom can read ({e}); delete it and log in again",
                path.display()
            ))
        })?;
        // A file copied from another server's name would hand that server's token out.
        if file.url != url || file.subject.as_deref() != subject {
            return Err(StoreError(format!(
                "{} holds the login to another server; delete it and log in again",
                path.display()
            )));
        }
        Ok(Some(file))
    }

    fn write_file(&self, file: &LoginFile) -> Result<(), StoreError> {
        let text = serde_json::to_string_pretty(file)
            .map_err(|e| StoreError(format!("cannot encode the login: {e}")))?;
        write_private(&self.login_path(&file.url, file.subject.as_deref()), &text)
    }

    /// Writes the login. Scopes a server asked for (a step-up) stay wanted until a login is
    /// granted them: a refresh, which keeps the grant, does not forget them.
    pub fn save(
        &self,
        url: &str,
        subject: Option<&str>,
        credentials: StoredCredentials,
    ) -> Result<(), StoreError> {
        let wanted_scopes = self
            .wanted_scopes(url, subject)
            .into_iter()
            .filter(|scope| !credentials.granted_scopes.contains(scope))
            .collect();
        self.write_file(&LoginFile {
            url: url.to_owned(),
            subject: subject.map(str::to_owned),
            credentials,
            wanted_scopes,
        })
    }

    /// Forgets the login; true when there was one.
    pub fn remove(&self, url: &str, subject: Option<&str>) -> Result<bool, StoreError> {
        let path = self.login_path(url, subject);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError(format!("cannot delete {}: {e}", path.display()))),
        }
    }

    /// The client loom registered with `issuer` before, if any.
    pub fn registration(&self, issuer: &str) -> Result<Option<Registration>, StoreError> {
        let path = self.registration_path(issuer);
        let Some(text) = read_private(&path)? else {
            return Ok(None);
        };
        let registration: Registration = serde_json::from_str(&text).map_err(|e| {
            StoreError(format!(
                "{} is not a client registration loom can read ({e}); delete it",
                path.display()
            ))
        })?;
        Ok((registration.issuer == issuer).then_some(registration))
    }

    pub fn save_registration(&self, registration: &Registration) -> Result<(), StoreError> {
        let text = serde_json::to_string_pretty(registration)
            .map_err(|e| StoreError(format!("cannot encode the registration: {e}")))?;
        write_private(&self.registration_path(&registration.issuer), &text)
    }

    /// Forgets the registration with `issuer` (the server no longer knows the client).
    pub fn remove_registration(&self, issuer: &str) -> Result<(), StoreError> {
        match fs::remove_file(self.registration_path(issuer)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError(format!("cannot delete a registration: {e}"))),
        }
    }

    /// rmcp's view of one login: what its authorization manager loads, saves and clears.
    pub fn credential_store(&self, url: &str, subject: Option<&str>) -> LoginStore {
        LoginStore {
            store: self.clone(),
            url: url.to_owned(),
            subject: subject.map(str::to_owned),
            guarded: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// One login as rmcp's [`CredentialStore`].
pub struct LoginStore {
    store: TokenStore,
    url: String,
    subject: Option<String>,
    /// A refresh guard was just taken: the next load is the refresh's own, and takes the
    /// shared copy first (rmcp loads on every request it prepares; those read the file only).
    guarded: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl CredentialStore for LoginStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let subject = self.subject.as_deref();
        let local = self.store.load(&self.url, subject)?;
        // In a cluster: a login made on another instance when there is none here, and before a
        // refresh the newest tokens (another instance may have refreshed since; a server that
        // rotates refresh tokens revokes a login whose old one is used).
        let refreshing = self
            .guarded
            .swap(false, std::sync::atomic::Ordering::AcqRel);
        if (local.is_none() || refreshing) && self.store.pull_shared(&self.url, subject).await {
            return Ok(self.store.load(&self.url, subject)?);
        }
        Ok(local)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.store
            .save(&self.url, self.subject.as_deref(), credentials)?;
        self.store
            .push_shared(&self.url, self.subject.as_deref())
            .await;
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store.remove(&self.url, self.subject.as_deref())?;
        self.store
            .push_shared(&self.url, self.subject.as_deref())
            .await;
        Ok(())
    }

    /// The authorization server refused the refresh token (revoked, expired, reused): the
    /// tokens are dropped, so `loom auth status` says a login is needed; the client id stays.
    /// Unless the file holds other tokens by now (a `loom auth login` meanwhile): those stay.
    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let same = |stored: &StoredCredentials| {
            serde_json::to_value(&stored.token_response).ok()
                == serde_json::to_value(&credentials.token_response).ok()
        };
        let subject = self.subject.as_deref();
        // In a cluster another instance may have refreshed first (a server that rotates refresh
        // tokens refuses the old one): its newer tokens are taken, not dropped.
        if self.store.pull_shared(&self.url, subject).await {
            return Ok(());
        }
        // The store's copy of these very tokens is revoked too: it must not come back.
        self.store
            .forget_shared_if(&self.url, subject, credentials)
            .await;
        let current = self.store.load(&self.url, subject)?;
        if !current.as_ref().is_some_and(same) {
            return Ok(());
        }
        let kept = StoredCredentials::new(credentials.client_id.clone(), None, Vec::new(), None)
            .with_issuer(credentials.issuer.clone());
        // The emptied file is not shared: another instance's newer tokens stay in the store.
        Ok(self.store.save(&self.url, subject, kept)?)
    }

    /// Refreshes of one login are made one at a time across processes (two looms — a desktop
    /// client's and an editor's — share the login file): a lock on `<file>.lock`, taken for the
    /// load, the exchange and the save. Without it, a server that rotates refresh tokens
    /// refuses the second process's refresh, and that loom would wait for a login needlessly.
    async fn acquire_refresh_guard(
        &self,
    ) -> Result<Option<rmcp::transport::auth::CredentialRefreshGuard>, AuthError> {
        let path = self
            .store
            .login_path(&self.url, self.subject.as_deref())
            .with_extension("json.lock");
        let file = tokio::task::spawn_blocking(move || lock_file(&path))
            .await
            .map_err(|e| AuthError::CredentialStoreError(format!("the refresh lock: {e}")))?
            .map_err(|e| AuthError::CredentialStoreError(e.0))?;
        // And across the instances of a cluster, for a subject's shared login.
        let shared = match self.store.shared_name(&self.url, self.subject.as_deref()) {
            Some((name, shared)) => shared.lock(&name).await,
            None => None,
        };
        self.guarded
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(Some(rmcp::transport::auth::CredentialRefreshGuard::new((
            file, shared,
        ))))
    }
}

/// How long a refresh waits for another process's refresh of the same login.
const REFRESH_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `path` opened (made 0600 if new) and locked exclusively; unlocked when the file is closed.
fn lock_file(path: &Path) -> Result<fs::File, StoreError> {
    if let Some(folder) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(|e| StoreError(format!("cannot create {}: {e}", folder.display())))?;
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| StoreError(format!("cannot open {}: {e}", path.display())))?;
    let deadline = std::time::Instant::now() + REFRESH_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(StoreError(format!(
                    "another process has been refreshing this login for {} s ({} is locked)",
                    REFRESH_LOCK_WAIT.as_secs(),
                    path.display()
                )));
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(StoreError(format!("cannot lock {}: {e}", path.display())));
            }
        }
    }
}

/// Hex of the first 12 bytes of SHA-256 over the parts (length-prefixed, so parts cannot
/// run into each other).
fn digest(parts: &[&str]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    context.finish().as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The URL's host in letters, digits, `.` and `-` only: a person listing the folder sees which
/// server a file is for.
fn readable_host(url: &str) -> String {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let clean: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(64)
        .collect();
    if clean.is_empty() {
        "server".to_owned()
    } else {
        clean
    }
}

/// The text of a private file; `None` when it does not exist. Refuses a file or folder that
/// others may read, and anything that is not a plain file.
fn read_private(path: &Path) -> Result<Option<String>, StoreError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError(format!("cannot read {}: {e}", path.display()))),
    };
    if !meta.is_file() {
        return Err(StoreError(format!(
            "{} is not a plain file (a link or a folder); delete it and log in again",
            path.display()
        )));
    }
    check_private(path, meta.permissions().mode(), "chmod 600")?;
    if let Some(folder) = path.parent() {
        let mode = fs::metadata(folder)
            .map_err(|e| StoreError(format!("cannot read {}: {e}", folder.display())))?
            .permissions()
            .mode();
        check_private(folder, mode, "chmod 700")?;
    }
    fs::read_to_string(path)
        .map(Some)
        .map_err(|e| StoreError(format!("cannot read {}: {e}", path.display())))
}

fn check_private(path: &Path, mode: u32, fix: &str) -> Result<(), StoreError> {
    if mode & GROUP_OR_OTHER != 0 {
        return Err(StoreError(format!(
            "{} may be read by other users (mode {:o}); it holds credentials, so loom will not \
             use it: run `{fix} {}`, or delete it and log in again",
            path.display(),
            mode & 0o777,
            path.display()
        )));
    }
    Ok(())
}

/// Writes `text` to `path` whole or not at all (a temporary file renamed over it), 0600 in
/// folders made 0700.
fn write_private(path: &Path, text: &str) -> Result<(), StoreError> {
    let folder = path
        .parent()
        .ok_or_else(|| StoreError(format!("{} has no folder", path.display())))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(|e| StoreError(format!("cannot create {}: {e}", folder.display())))?;
    // A folder made before (by another tool, or with another umask) is checked, not changed.
    let mode = fs::metadata(folder)
        .map_err(|e| StoreError(format!("cannot read {}: {e}", folder.display())))?
        .permissions()
        .mode();
    check_private(folder, mode, "chmod 700")?;
    // Unique per write, not only per process: two tasks may write the same login at once.
    let temporary = folder.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("login"),
        std::process::id(),
        crate::token::random_hex().unwrap_or_default()
    ));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(&temporary);
        StoreError(format!("cannot write {}: {e}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_refresh_of_a_login_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oauth").join("x.json.lock");
        let first = lock_file(&path).unwrap();
        let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = released.clone();
        let other = path.clone();
        let second = std::thread::spawn(move || {
            let _held = lock_file(&other).unwrap();
            seen.load(std::sync::atomic::Ordering::SeqCst)
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(first);
        assert!(
            second.join().unwrap(),
            "the second lock was had while the first was held"
        );
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// A store instances share, in memory.
    #[derive(Default)]
    struct Shared(std::sync::Mutex<std::collections::HashMap<String, String>>);

    #[async_trait::async_trait]
    impl SharedLogins for Shared {
        async fn fetch(&self, name: &str) -> Option<String> {
            self.0.lock().ok()?.get(name).cloned()
        }
        async fn put(&self, name: &str, text: String) {
            if let Ok(mut files) = self.0.lock() {
                files.insert(name.to_owned(), text);
            }
        }
        async fn delete(&self, name: &str) {
            if let Ok(mut files) = self.0.lock() {
                files.remove(name);
            }
        }
        async fn lock(&self, _: &str) -> Option<Box<dyn Send>> {
            None
        }
    }

    /// Two instances' login folders sharing one store (the folders live as long as the last).
    fn two_instances() -> (
        std::sync::Arc<Shared>,
        TokenStore,
        TokenStore,
        (tempfile::TempDir, tempfile::TempDir),
    ) {
        let shared = std::sync::Arc::new(Shared::default());
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = TokenStore::new(one.path().join("oauth")).sharing(shared.clone());
        let b = TokenStore::new(two.path().join("oauth")).sharing(shared.clone());
        (shared, a, b, (one, two))
    }

    #[tokio::test]
    async fn a_subject_s_login_made_on_one_instance_serves_another_the_machine_s_stays() {
        let (shared, a, b, _folders) = two_instances();
        let url = "https://mcp.example/mcp";
        a.credential_store(url, Some("bob"))
            .save(credentials("c1"))
            .await
            .unwrap();
        // B has no file of its own: it takes A's, and keeps it as its own file.
        let loaded = b.credential_store(url, Some("bob")).load().await.unwrap();
        assert_eq!(loaded.map(|c| c.client_id), Some("c1".to_owned()));
        assert!(b.login_path(url, Some("bob")).exists());
        // Another subject, and the machine's login, are not shared.
        assert!(
            b.credential_store(url, Some("carol"))
                .load()
                .await
                .unwrap()
                .is_none()
        );
        a.credential_store(url, None)
            .save(credentials("m"))
            .await
            .unwrap();
        assert!(
            b.credential_store(url, None)
                .load()
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(shared.0.lock().unwrap().len(), 1);
        // A refresh on B reaches A at A's next refresh (the load under its refresh guard), not
        // at every load (rmcp loads for every request); nothing changes when nothing is new.
        b.credential_store(url, Some("bob"))
            .save(credentials("c2"))
            .await
            .unwrap();
        assert!(!b.pull_shared(url, Some("bob")).await);
        let login_a = a.credential_store(url, Some("bob"));
        let unguarded = login_a.load().await.unwrap();
        assert_eq!(unguarded.map(|c| c.client_id), Some("c1".to_owned()));
        let guard = login_a.acquire_refresh_guard().await.unwrap();
        let again = login_a.load().await.unwrap();
        drop(guard);
        assert_eq!(again.map(|c| c.client_id), Some("c2".to_owned()));
        // A refusal taken for another instance's refresh: B's newer login is taken, not dropped.
        a.save(url, Some("bob"), credentials("c1")).unwrap();
        a.credential_store(url, Some("bob"))
            .on_refresh_token_rejected(&credentials("c1"))
            .await
            .unwrap();
        let kept = a.load(url, Some("bob")).unwrap();
        assert_eq!(kept.map(|c| c.client_id), Some("c2".to_owned()));
        // A logout on one instance is a logout everywhere.
        a.credential_store(url, Some("bob")).clear().await.unwrap();
        assert!(shared.0.lock().unwrap().is_empty());
    }

    /// A login with tokens `access`, received at `at` (seconds).
    fn tokens(access: &str, at: u64) -> StoredCredentials {
        let response = serde_json::from_value(serde_json::json!({
            "access_token": access, "token_type": "bearer", "refresh_token": format!("r-{access}")
        }))
        .unwrap();
        StoredCredentials::new("c".to_owned(), Some(response), vec![], Some(at))
    }

    fn access_of(store: &TokenStore, url: &str) -> Option<String> {
        let credentials = store.load(url, Some("bob")).unwrap()?;
        let value = serde_json::to_value(credentials.token_response?).unwrap();
        value["access_token"].as_str().map(str::to_owned)
    }

    #[tokio::test]
    async fn the_newer_login_wins_and_a_refused_one_never_comes_back_from_the_store() {
        let (shared, a, b, _folders) = two_instances();
        let url = "https://mcp.example/mcp";
        a.credential_store(url, Some("bob"))
            .save(tokens("t1", 10))
            .await
            .unwrap();
        assert!(b.pull_shared(url, Some("bob")).await);
        // B refreshes, but its share is lost (the store failed): the store still holds t1.
        b.save(url, Some("bob"), tokens("t2", 20)).unwrap();
        // B's newer tokens are not replaced by the older shared ones; they are shared again.
        assert!(!b.pull_shared(url, Some("bob")).await);
        assert_eq!(access_of(&b, url).as_deref(), Some("t2"));
        assert!(a.pull_shared(url, Some("bob")).await);
        assert_eq!(access_of(&a, url).as_deref(), Some("t2"));
        // The server revokes t2's refresh token: the store forgets t2, and nothing brings the
        // revoked login back to either instance.
        a.credential_store(url, Some("bob"))
            .on_refresh_token_rejected(&tokens("t2", 20))
            .await
            .unwrap();
        assert!(shared.0.lock().unwrap().is_empty());
        assert_eq!(access_of(&a, url), None);
        assert!(!a.pull_shared(url, Some("bob")).await);
    }

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["read".into()], Some(1))
            .with_issuer(Some("https://as.example".into()))
    }

    #[test]
    fn wanted_scopes_outlive_a_refresh_but_not_a_login_granted_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("oauth"));
        let url = "https://mcp.example/mcp";
        store.save(url, None, credentials("c")).unwrap();
        store.want_scopes(url, None, &["write".into()]).unwrap();
        // A refresh writes the same grant again: `write` is still wanted.
        store.save(url, None, credentials("c")).unwrap();
        assert_eq!(store.wanted_scopes(url, None), ["write"]);
        // A login granted it: nothing more is wanted.
        let granted = StoredCredentials::new(
            "c".into(),
            None,
            vec!["read".into(), "write".into()],
            Some(2),
        );
        store.save(url, None, granted).unwrap();
        assert!(store.wanted_scopes(url, None).is_empty());
    }

    #[test]
    fn the_folder_follows_xdg_then_home() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            default_root(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            Some(PathBuf::from("/s/loom/oauth"))
        );
        // A relative XDG path is ignored, as the XDG spec says.
        assert_eq!(
            default_root(env(&[("XDG_STATE_HOME", "s"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/loom/oauth"))
        );
        assert_eq!(default_root(env(&[])), None);
    }

    #[test]
    fn a_login_is_kept_private_and_per_server_and_subject() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("oauth"));
        let url = "https://mcp.example.com/mcp";
        store.save(url, None, credentials("c1")).unwrap();
        store
            .save(url, Some("iss alice"), credentials("c2"))
            .unwrap();
        assert_eq!(store.load(url, None).unwrap().unwrap().client_id, "c1");
        assert_eq!(
            store
                .load(url, Some("iss alice"))
                .unwrap()
                .unwrap()
                .client_id,
            "c2"
        );
        assert!(store.load(url, Some("iss bob")).unwrap().is_none());
        assert!(
            store
                .load("https://other.example/mcp", None)
                .unwrap()
                .is_none()
        );
        let path = store.login_path(url, None);
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("mcp.example.com-")
        );
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(store.remove(url, None).unwrap());
        assert!(!store.remove(url, None).unwrap());
        assert!(store.load(url, None).unwrap().is_none());
    }

    #[test]
    fn readable_corrupt_or_moved_files_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("oauth"));
        let url = "https://mcp.example.com/mcp";
        store.save(url, None, credentials("c1")).unwrap();
        let path = store.login_path(url, None);

        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let error = store.load(url, None).unwrap_err().0;
        assert!(
            error.contains("mode 644") && error.contains("chmod 600"),
            "{error}"
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();

        fs::set_permissions(path.parent().unwrap(), fs::Permissions::from_mode(0o755)).unwrap();
        let error = store.load(url, None).unwrap_err().0;
        assert!(error.contains("chmod 700"), "{error}");
        let error = store.save(url, None, credentials("c3")).unwrap_err().0;
        assert!(error.contains("chmod 700"), "{error}");
        fs::set_permissions(path.parent().unwrap(), fs::Permissions::from_mode(0o700)).unwrap();

        fs::write(&path, "{not json").unwrap();
        let error = store.load(url, None).unwrap_err().0;
        assert!(
            error.contains("not a login file") && error.contains("log in again"),
            "{error}"
        );

        // Another server's file under this server's name is not handed out.
        let other = store.login_path("https://evil.example/mcp", None);
        store
            .save("https://evil.example/mcp", None, credentials("e"))
            .unwrap();
        fs::rename(&other, &path).unwrap();
        let error = store.load(url, None).unwrap_err().0;
        assert!(error.contains("another server"), "{error}");
    }

    #[test]
    fn registrations_are_kept_per_issuer() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().to_path_buf());
        let registration = Registration {
            issuer: "https://as.example".into(),
            client_id: "dyn-1".into(),
        };
        assert!(store.registration("https://as.example").unwrap().is_none());
        store.save_registration(&registration).unwrap();
        assert_eq!(
            store.registration("https://as.example").unwrap(),
            Some(registration)
        );
        assert!(
            store
                .registration("https://other.example")
                .unwrap()
                .is_none()
        );
        store.remove_registration("https://as.example").unwrap();
        assert!(store.registration("https://as.example").unwrap().is_none());
    }
}
