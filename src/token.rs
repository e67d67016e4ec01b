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
