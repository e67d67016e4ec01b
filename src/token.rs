//! Secrets loom mints (handles a client must present again: `requestState`, stateless scopes)
//! and digests of secrets it is given (bearer tokens), from the operating system's random
//! source and SHA-256 (ring, already built for TLS).
//!
//! A leaf: it uses nothing of loom's.

use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};

/// 128 random bits as 32 lowercase hex digits: unguessable. `None` only when the operating
/// system cannot give randomness, which callers report rather than fall back on anything
/// weaker.
pub(crate) fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 16];
    SystemRandom::new().fill(&mut bytes).ok()?;
    Some(hex(&bytes))
}

/// The SHA-256 digest of `domain`, a NUL byte and `secret`, as hex: a name for a secret that
/// does not reveal it (the domain keeps digests made for one purpose from matching another's).
pub(crate) fn digest_hex(domain: &str, secret: &[u8]) -> String {
    let mut input = Vec::with_capacity(domain.len() + 1 + secret.len());
    input.extend_from_slice(domain.as_bytes());
    input.push(0);
    input.extend_from_slice(secret);
    hex(digest(&SHA256, &input).as_ref())
}

/// HMAC-SHA-256 of `domain`, a NUL byte and `data` under `key`, as hex: a name only holders of
/// the key can compute (a cluster's scope folders, SPEC §25).
pub(crate) fn keyed_hex(key: &[u8], domain: &str, data: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let mut context = ring::hmac::Context::with_key(&key);
    context.update(domain.as_bytes());
    context.update(&[0]);
    context.update(data);
    hex(context.sign().as_ref())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_handles_are_long_and_distinct() {
        let a = random_hex().expect("randomness");
        let b = random_hex().expect("randomness");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn keyed_names_depend_on_the_key() {
        let a = keyed_hex(b"k1", "scope", b"stdio");
        assert_eq!(a, keyed_hex(b"k1", "scope", b"stdio"));
        assert_ne!(a, keyed_hex(b"k2", "scope", b"stdio"));
        assert_ne!(a, keyed_hex(b"k1", "other", b"stdio"));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn digests_depend_on_domain_and_secret() {
        assert_eq!(
            digest_hex("scope", b"secret"),
            digest_hex("scope", b"secret")
        );
        assert_ne!(
            digest_hex("scope", b"secret"),
            digest_hex("other", b"secret")
        );
        assert_ne!(
            digest_hex("scope", b"secret"),
            digest_hex("scope", b"secreT")
        );
        assert_eq!(digest_hex("d", b"").len(), 64);
    }
}
