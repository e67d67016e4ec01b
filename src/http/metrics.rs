//! `--metrics ADDR`: the Prometheus scrape endpoint `GET /metrics` (SPEC §24.2), on a listener
//! of its own, beside stdio or the HTTP face.
//!
//! On a loopback address anyone on the machine may scrape; on any other address the HTTP face's
//! rules hold: a bearer token of `http.token` / `http.tokens` is wanted (Prometheus sends one
//! with `authorization: {credentials: …}`), unless `--allow-no-token` says something in front
//! of loom checks who scrapes.

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{Body, bearer_token, full, http1_server, matched_credential};
use crate::config::HttpConfig;

/// The path metrics are served at.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// Who may scrape.
struct Access {
    /// The static tokens; empty: no token is asked for.
    tokens: Vec<String>,
}

/// Why `--metrics` cannot serve `addr` with `http`: a non-loopback address without a token.
pub(crate) fn refusal(addr: SocketAddr, http: &HttpConfig, allow_no_token: bool) -> Option<String> {
    if addr.ip().is_loopback() || allow_no_token || http.credentials().next().is_some() {
        return None;
    }
    Some(format!(
        "loom: refusing to serve metrics on {addr} without a bearer token: it is not a loopback \
         address; set `http.token` (or `http.tokens`) for scrapers to send, serve metrics on a \
         loopback address such as 127.0.0.1:9464, or pass --allow-no-token when something in \
         front of loom checks who scrapes"
    ))
}

/// Bind `addr` (reported at once when taken) and serve metrics until `stop` is cancelled.
pub(crate) async fn serve(
    addr: SocketAddr,
    http: &HttpConfig,
    stop: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| format!("loom: cannot serve metrics on {addr}: {error}"))?;
    let local = listener.local_addr().unwrap_or(addr);
    let access = Arc::new(Access {
        tokens: match local.ip().is_loopback() {
            true => Vec::new(),
            false => http.credentials().map(str::to_string).collect(),
        },
    });
    let running = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _peer)) = accepted else {
                // Out of descriptors for a moment: the next accept may succeed.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let access = access.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answer = answer(&access, &request);
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                let connection =
                    http1_server().serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    _ = &mut connection => {}
                    _ = stop.cancelled() => connection.as_mut().graceful_shutdown(),
                }
            });
        }
    });
    Ok((local, running))
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn answer<B>(access: &Access, request: &Request<B>) -> Response<Body> {
    if request.uri().path() != METRICS_PATH {
        return text(
            StatusCode::NOT_FOUND,
            format!("loom serves metrics at {METRICS_PATH}\n"),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
        response.headers_mut().insert(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD"),
        );
        return response;
    }
    if !access.tokens.is_empty() {
        let given = bearer_token(request);
        if matched_credential(given, access.tokens.iter().map(String::as_str)).is_none() {
            let mut response = text(
                StatusCode::UNAUTHORIZED,
                "metrics want `Authorization: Bearer <token>` (this loom's `http.token` or one of \
                 `http.tokens`)\n"
                    .into(),
            );
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer realm=\"loom\""),
            );
            return response;
        }
    }
    match crate::telemetry::metrics::scrape() {
        Some(body) => {
            let mut response = Response::new(full(body));
            response.headers_mut().insert(
                CONTENT_TYPE,
                http::HeaderValue::from_static(crate::telemetry::metrics::CONTENT_TYPE),
            );
            response
        }
        None => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics are not being kept\n".into(),
        ),
    }
}
