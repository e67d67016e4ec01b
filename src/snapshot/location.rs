//! Where snapshots go: opening a root (local, memory, S3) and keeping secrets out of what is shown.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path as StorePath;

/// Where snapshots go: an object store and a root prefix inside it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    pub root: StorePath,
    /// How `catalog.sql` names files: `file:///abs/dir`, `s3://bucket/prefix`, `memory:///`.
    pub url_base: String,
    /// An S3-compatible endpoint other than AWS, for messages.
    pub endpoint: Option<String>,
}

/// Only the root: the store's own Debug would show configuration (an access key id among it).
impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("url_base", &self.url_base)
            .finish_non_exhaustive()
    }
}

/// Open a snapshot root: a directory path (created if missing), `file://`, `memory://` or
/// `s3://bucket/prefix` (credentials and region from the usual AWS environment variables only).
pub fn open(url: &str) -> Result<Location, String> {
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let (builder, endpoint) = s3_builder(bucket);
        let store = builder
            .build()
            .map_err(|e| format!("cannot open {url}: {}", scrub(&e.to_string())))?;
        return Ok(Location {
            store: Arc::new(store),
            root: StorePath::from(prefix),
            url_base: format!("s3://{bucket}/{prefix}")
                .trim_end_matches('/')
                .to_string(),
            endpoint,
        });
    }
    if url.starts_with("memory://") {
        return Ok(Location {
            store: Arc::new(object_store::memory::InMemory::new()),
            root: StorePath::from(""),
            url_base: "memory://".into(),
            endpoint: None,
        });
    }
    let dir = url.strip_prefix("file://").unwrap_or(url);
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the snapshot directory {dir}: {e}"))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve {dir}: {e}"))?;
    let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
        .map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    Ok(Location {
        store: Arc::new(store),
        root: StorePath::from(""),
        url_base: format!("file://{}", dir.display()),
        endpoint: None,
    })
}

/// How long one S3 request may take, connection included, and how often a failed one is retried
/// (object_store's defaults, 10 retries over up to 3 minutes, would hold `loom query` that long
/// on an endpoint that is down).
pub(super) const S3_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
pub(super) const S3_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
pub(super) const S3_RETRIES: usize = 3;
pub(super) const S3_RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// S3 from the usual AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`, …), path-style
/// requests unless `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true`. An `http://` endpoint (an
/// S3-compatible server on a private network) is allowed without also setting `AWS_ALLOW_HTTP`.
/// Also returns the endpoint, when one is set (for messages).
pub(super) fn s3_builder(bucket: &str) -> (object_store::aws::AmazonS3Builder, Option<String>) {
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey;
    let mut builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
    let endpoint = [AmazonS3ConfigKey::S3Endpoint, AmazonS3ConfigKey::Endpoint]
        .iter()
        .find_map(|key| builder.get_config_value(key));
    let plain_http = endpoint
        .as_deref()
        .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"));
    if plain_http && std::env::var_os("AWS_ALLOW_HTTP").is_none() {
        builder = builder.with_allow_http(true);
    }
    // Client settings go in one by one: `with_client_options` would replace those the
    // environment gave (AWS_ALLOW_HTTP, a proxy, …).
    for (key, value) in [
        (ClientConfigKey::ConnectTimeout, S3_CONNECT_TIMEOUT),
        (ClientConfigKey::Timeout, S3_REQUEST_TIMEOUT),
    ] {
        let key = AmazonS3ConfigKey::Client(key);
        if builder.get_config_value(&key).is_none() {
            builder = builder.with_config(key, format!("{}s", value.as_secs()));
        }
    }
    let builder = builder.with_retry(object_store::RetryConfig {
        max_retries: S3_RETRIES,
        retry_timeout: S3_RETRY_TIMEOUT,
        ..Default::default()
    });
    (builder, endpoint)
}

/// `text` with the values of the AWS secrets of this process's environment replaced: an error
/// from the store never shows them, whatever it quotes.
pub fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    for key in [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID",
    ] {
        if let Ok(value) = std::env::var(key)
            && value.len() >= 4
        {
            out = out.replace(&value, "***");
        }
    }
    out
}

/// Open a snapshot root that must already exist (for reading).
pub fn open_existing(url: &str) -> Result<Location, String> {
    if !url.contains("://") && !std::path::Path::new(url).is_dir() {
        return Err(format!("no snapshot at {url}: not a directory"));
    }
    if let Some(dir) = url.strip_prefix("file://")
        && !std::path::Path::new(dir).is_dir()
    {
        return Err(format!("no snapshot at {url}: not a directory"));
    }
    open(url)
}

pub(crate) fn child(root: &StorePath, parts: &[&str]) -> StorePath {
    let mut path = root.clone();
    for part in parts {
        path = path.join(*part);
    }
    path
}
