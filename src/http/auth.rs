//! `loom serve --http` as an OAuth 2.1 protected resource (SPEC §22.1): access tokens are JWTs
//! of one authorization server, checked against its published keys (signature with an
//! asymmetric algorithm only, `iss`, `aud`, `exp`/`nbf` with 60 s of leeway, the required
//! scopes); the Protected Resource Metadata (RFC 9728) tells clients where to log in. A token's
//! subject (`iss` and `sub`) is its client's scope: a refreshed token sees the same data.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use crate::config::HttpAuth;

/// Where the metadata is served (the second form names the resource's path, RFC 9728 §3.1).
pub(crate) const METADATA_PATHS: [&str; 2] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
];

/// How far `exp` and `nbf` may be off (clocks differ).
const LEEWAY_SECS: u64 = 60;
/// An unknown `kid` fetches the keys again, at most this often.
const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How long fetching the keys or the issuer's metadata may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed fetch of the keys, tokens are refused with its reason for this long before
/// loom asks again: a flood of requests while the issuer is down must not queue a fetch each.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 401 `invalid_token` (or no token): the reason, for the body.
    Invalid(String),
    /// 403 `insufficient_scope`: the scopes missing.
    InsufficientScope(Vec<String>),
}

/// The keys of the issuer, as last fetched.
struct Keys {
    set: JwkSet,
    fetched: Instant,
}

pub(crate) struct ResourceServer {
    settings: HttpAuth,
    /// The `aud` tokens must carry and the `resource` of the metadata.
    resource: String,
    http: reqwest::Client,
    keys: tokio::sync::Mutex<Option<Keys>>,
    /// The last time an unknown `kid` made loom fetch the keys (bounds the fetching a stream of
    /// forged tokens could cause).
    last_refetch: Mutex<Option<Instant>>,
    /// When fetching the keys last failed, and why.
    last_failure: Mutex<Option<(Instant, String)>>,
}

impl ResourceServer {
    /// `own_url`: loom's `http://ADDR/mcp`, the audience when `http.auth.audience` is unset.
    pub(crate) fn new(settings: HttpAuth, own_url: &str) -> Result<Self, String> {
        crate::common::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(ResourceServer {
            resource: settings
                .audience
                .clone()
                .unwrap_or_else(|| own_url.to_owned()),
            settings,
            http,
            keys: tokio::sync::Mutex::new(None),
            last_refetch: Mutex::new(None),
            last_failure: Mutex::new(None),
        })
    }

    /// The Protected Resource Metadata document.
    pub(crate) fn metadata(&self) -> Value {
        let mut document = json!({
            "resource": self.resource,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "loom",
        });
        if !self.settings.required_scopes.is_empty() {
            document["scopes_supported"] = json!(self.settings.required_scopes);
        }
        document
    }

    /// Where [`Self::metadata`] is served for this resource: the well-known path with the
    /// resource's own path after it (RFC 9728 §3.1).
    pub(crate) fn metadata_url(&self) -> String {
        match reqwest::Url::parse(&self.resource) {
            Ok(url) => format!(
                "{}{}{}",
                url.origin().ascii_serialization(),
                METADATA_PATHS[0],
                url.path().trim_end_matches('/')
            ),
            Err(_) => METADATA_PATHS[1].to_owned(),
        }
    }

    /// Where a subject's browser comes back from a login to a remote server (SPEC §4.7): the
    /// resource's origin and `/oauth/callback`; `own_url`'s when the resource is no URL.
    pub(crate) fn callback_url(&self, own_url: &str) -> String {
        let origin = reqwest::Url::parse(&self.resource)
            .or_else(|_| reqwest::Url::parse(own_url))
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or_default();
        format!(
            "{origin}{}",
            crate::downstream::oauth::redirects::CALLBACK_PATH
        )
    }

    /// The `WWW-Authenticate` value of a refusal; `metadata_url` is where [`Self::metadata`]
    /// is served.
    pub(crate) fn challenge(&self, refusal: Option<&Refusal>, metadata_url: &str) -> String {
        match refusal {
            None => format!("Bearer resource_metadata=\"{metadata_url}\""),
            Some(Refusal::Invalid(_)) => {
                format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata_url}\"")
            }
            Some(Refusal::InsufficientScope(_)) => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata_url}\"",
                self.settings.required_scopes.join(" ")
            ),
        }
    }

    /// The token's subject (`iss` and `sub`), when loom accepts it.
    pub(crate) async fn verify(&self, token: &str) -> Result<String, Refusal> {
        let invalid = |why: String| Refusal::Invalid(why);
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("the token is not a JWT loom can read ({e})")))?;
        if !is_asymmetric(header.alg) {
            return Err(invalid(format!(
                "the token is signed with {:?}; loom accepts only the issuer's public-key \
                 signatures (RS*, PS*, ES*, EdDSA)",
                header.alg
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| invalid(format!("the token was refused: {e}")))?
            .claims;
        let granted = scopes_of(&claims);
        let missing: Vec<String> = self
            .settings
            .required_scopes
            .iter()
            .filter(|s| !granted.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(missing));
        }
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(format!("{} {subject}", self.settings.issuer))
    }

    /// The key `kid` names (or the only key of the algorithm's family), fetching the keys when
    /// there are none yet, or again (at most once a minute) when `kid` is unknown.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let mut keys = self.keys.lock().await;
        if keys.is_none() {
            *keys = Some(self.fetch_keys().await?);
        }
        if let Some(key) = keys.as_ref().and_then(|k| pick(&k.set, kid, alg)) {
            return key;
        }
        let may_refetch = {
            let mut last = self
                .last_refetch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let fresh = keys
                .as_ref()
                .is_some_and(|k| k.fetched.elapsed() < REFETCH_EVERY);
            let allowed = !fresh && last.is_none_or(|at| at.elapsed() >= REFETCH_EVERY);
            if allowed {
                *last = Some(Instant::now());
            }
            allowed
        };
        if may_refetch {
            *keys = Some(self.fetch_keys().await?);
            if let Some(key) = keys.as_ref().and_then(|k| pick(&k.set, kid, alg)) {
                return key;
            }
        }
        Err(Refusal::Invalid(format!(
            "the token is signed with a key the issuer does not publish (kid {})",
            kid.unwrap_or("(none)")
        )))
    }

    async fn fetch_keys(&self) -> Result<Keys, Refusal> {
        let recent = self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .filter(|(at, _)| at.elapsed() < RETRY_AFTER_FAILURE);
        if let Some((_, why)) = recent {
            return Err(Refusal::Invalid(format!(
                "loom cannot check tokens now: {why}"
            )));
        }
        let unavailable = |why: String| {
            tracing::warn!("cannot check access tokens: {why}");
            *self
                .last_failure
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((Instant::now(), why.clone()));
            Refusal::Invalid(format!("loom cannot check tokens now: {why}"))
        };
        let url = match &self.settings.jwks_url {
            Some(url) => url.clone(),
            None => self.jwks_uri().await.map_err(unavailable)?,
        };
        let set: JwkSet = self.get_json(&url).await.map_err(unavailable)?;
        Ok(Keys {
            set,
            fetched: Instant::now(),
        })
    }

    /// `jwks_uri` of the issuer's metadata: RFC 8414 first, then OpenID discovery.
    async fn jwks_uri(&self) -> Result<String, String> {
        let issuer = self.settings.issuer.trim_end_matches('/');
        let parsed = reqwest::Url::parse(issuer).map_err(|e| format!("issuer: {e}"))?;
        let origin = parsed.origin().ascii_serialization();
        let path = parsed.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        for url in &candidates {
            if let Ok(metadata) = self.get_json::<Value>(url).await
                && let Some(jwks) = metadata.get("jwks_uri").and_then(Value::as_str)
            {
                return Ok(jwks.to_owned());
            }
        }
        Err(format!(
            "the issuer {issuer} publishes no jwks_uri at {} (set `http.auth.jwksUrl`)",
            candidates.join(" or ")
        ))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{url}: {}", crate::common::text::error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered HTTP {}", response.status()));
        }
        response
            .json::<T>()
            .await
            .map_err(|e| format!("{url}: not the JSON expected ({e})"))
    }
}

/// The key for `kid`, or without a `kid` the only key that fits the algorithm.
fn pick(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<Result<DecodingKey, Refusal>> {
    let jwk = match kid {
        Some(kid) => set.find(kid)?,
        None => {
            let mut fitting = set
                .keys
                .iter()
                .filter(|k| DecodingKey::from_jwk(k).is_ok_and(|_| key_fits(k, alg)));
            let only = fitting.next()?;
            if fitting.next().is_some() {
                return Some(Err(Refusal::Invalid(
                    "the token names no key (`kid`) and the issuer publishes several".to_owned(),
                )));
            }
            only
        }
    };
    Some(
        DecodingKey::from_jwk(jwk).map_err(|e| {
            Refusal::Invalid(format!("the issuer's key {kid:?} cannot be used ({e})"))
        }),
    )
}

fn key_fits(jwk: &jsonwebtoken::jwk::Jwk, alg: Algorithm) -> bool {
    use jsonwebtoken::jwk::AlgorithmParameters::*;
    matches!(
        (&jwk.algorithm, alg),
        (
            RSA(_),
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ) | (EllipticCurve(_), Algorithm::ES256 | Algorithm::ES384)
            | (OctetKeyPair(_), Algorithm::EdDSA)
    )
}

/// Only signatures made with the issuer's private key: never `none` (which the JWT library
/// does not even read), never an HMAC (its "key" would be the public key anyone has).
fn is_asymmetric(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// The token's scopes: `scope` (space-separated, RFC 9068) or `scp` (an array, some IdPs).
fn scopes_of(claims: &Value) -> Vec<String> {
    if let Some(scope) = claims.get("scope").and_then(Value::as_str) {
        return scope.split_whitespace().map(str::to_owned).collect();
    }
    match claims.get("scp") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_read_from_scope_or_scp() {
        assert_eq!(scopes_of(&json!({"scope": "a b"})), ["a", "b"]);
        assert_eq!(scopes_of(&json!({"scp": ["a", "b"]})), ["a", "b"]);
        assert!(scopes_of(&json!({})).is_empty());
    }

    #[test]
    fn hmac_and_unknown_algorithms_are_refused_before_any_key_is_fetched() {
        let server = ResourceServer::new(
            HttpAuth {
                issuer: "http://127.0.0.1:9".into(),
                audience: None,
                required_scopes: vec![],
                jwks_url: Some("http://127.0.0.1:9/jwks".into()),
            },
            "http://127.0.0.1:1/mcp",
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // {"alg":"HS256","typ":"JWT"} . {"sub":"x"} . signature
        let hs = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2ln";
        let Err(Refusal::Invalid(why)) = runtime.block_on(server.verify(hs)) else {
            panic!("accepted an HMAC token")
        };
        assert!(why.contains("HS256"), "{why}");
        // {"alg":"none"}
        let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
        let Err(Refusal::Invalid(why)) = runtime.block_on(server.verify(none)) else {
            panic!("accepted alg none")
        };
        assert!(why.contains("not a JWT loom can read"), "{why}");
    }
}
