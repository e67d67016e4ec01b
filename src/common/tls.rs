//! TLS set-up every HTTPS client of loom shares (remote servers, the `llm` endpoint, tests).

use std::sync::Once;

/// rustls needs one process-wide crypto provider; loom uses ring (see Cargo.toml). Anything in
/// this process that builds a reqwest client calls this first.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err only when one is installed already, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
