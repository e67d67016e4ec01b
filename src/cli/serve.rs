//! `loom` / `loom serve`: the gateway over stdio until the client goes away or a signal arrives.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{EXIT_CONFIG, EXIT_START};
use crate::gateway::{Gateway, GatewayService, Hub};
use crate::wire::LineTransport;

/// Where loom is reached: stdio (the default), HTTP, or both.
#[derive(Debug, Clone, Copy)]
pub(super) struct Faces {
    pub http: Option<SocketAddr>,
    /// Also stdio when `http` is set (stdio alone otherwise).
    pub stdio: bool,
    /// `--allow-no-token`: a non-loopback `http` address may go without `http.token`.
    pub allow_no_token: bool,
    /// `--metrics ADDR`: Prometheus metrics served there (SPEC §24.2).
    pub metrics: Option<SocketAddr>,
}

pub(super) fn run(path: &Path, faces: Faces) -> ExitCode {
    let config = match crate::config::load(path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    for warning in &config.warnings {
        tracing::warn!("config {warning}");
    }
    // Over stdio every message passes one thread: the runtime runs on the thread that reads
    // and writes the pipes, so a pass-through call wakes no other thread (measured: 150 → 120 µs
    // of CPU and 5.8 → 3 context switches per call). Work that takes long never runs here: the
    // engine has its own runtime and large results are handled on blocking threads. The HTTP
    // face serves many sessions at once and keeps one worker per core.
    let mut builder = match faces.http {
        None => tokio::runtime::Builder::new_current_thread(),
        Some(_) => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loom: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    if let Some(addr) = faces.http
        && !addr.ip().is_loopback()
        && !config.http.wants_token()
        && !faces.allow_no_token
    {
        eprintln!(
            "loom: refusing to serve {addr} without a bearer token: it is not a loopback address, \
             so anyone who can reach it could use every server behind loom; set `http.token` (or \
             `http.tokens`) in {}, serve a loopback address such as 127.0.0.1:8808, or pass \
             --allow-no-token when something in front of loom authenticates its clients",
            path.display()
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    if let Some(addr) = faces.metrics
        && let Some(refusal) =
            crate::http::metrics_refusal(addr, &config.http, faces.allow_no_token)
    {
        eprintln!("{refusal}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let code = runtime.block_on(async move {
        let stop_metrics = tokio_util::sync::CancellationToken::new();
        let metrics = match start_telemetry(&config, faces.metrics, stop_metrics.clone()).await {
            Ok(metrics) => metrics,
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::from(EXIT_START);
            }
        };
        let code = match faces.http {
            None => serve(config).await,
            Some(addr) => serve_http(config, addr, faces.stdio).await,
        };
        stop_metrics.cancel();
        if let Some(running) = metrics {
            let _ = running.await;
        }
        // Spans still queued get a moment to reach the collector (an unreachable one costs no
        // more), while the runtime still runs: the gRPC exporter's channel lives on it.
        let _ = tokio::task::spawn_blocking(|| crate::telemetry::shutdown(TELEMETRY_FLUSH)).await;
        code
    });
    // Reading stdin from a terminal or a file parks a blocking thread that only returns at
    // EOF; after a signal it may still be parked, and it must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// What writing the last audit lines and exporting the last spans may add to loom's exit: with
/// the servers' stop (`SHUTDOWN_BUDGET`, 1.8 s) loom still exits within 2 s of a signal.
const TELEMETRY_FLUSH: Duration = Duration::from_millis(200);

/// Turn on traces, metrics and the audit log as asked (SPEC §24); the metrics listener's task
/// when `--metrics` was given.
async fn start_telemetry(
    config: &crate::config::Config,
    metrics: Option<SocketAddr>,
    stop: tokio_util::sync::CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
    let started = crate::telemetry::start(config, metrics.is_some())
        .map_err(|error| format!("loom: {error}"))?;
    if let Some(endpoint) = &started.traces {
        tracing::info!("traces go to {}", crate::config::mask_url(endpoint));
    }
    let Some(addr) = metrics else {
        return Ok(None);
    };
    let (local, running) = crate::http::serve_metrics(addr, &config.http, stop).await?;
    tracing::info!("metrics at http://{local}{}", crate::http::METRICS_PATH);
    Ok(Some(running))
}

async fn serve(config: crate::config::Config) -> ExitCode {
    let gateway = match Gateway::start(config).await {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("loom: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    release_start_up_pages();
    let code = tokio::select! {
        code = serve_stdio(&gateway) => code,
        signal = shutdown_signal() => {
            tracing::info!("{signal}: shutting down");
            ExitCode::SUCCESS
        }
    };
    // The report first: it is what the session did, which stopping the servers does not change,
    // and a client that gives loom a short grace (the 1.x Python SDK: 2 s after closing stdin,
    // then SIGTERM, then SIGKILL) must not cost the user the report while servers stop.
    gateway.write_report();
    gateway.shutdown().await;
    code
}

/// Start-up is over (the engine checked, the servers started): hand back the code pages it
/// touched (src/footprint.rs), a second later and on a thread of its own, and again whenever
/// heavy work has stopped for a while. Reclaiming some 60 MiB of pages takes tens of
/// milliseconds, which the client's `initialize` and first listing must not wait for
/// (measured: the cold-start gap went from 26 to 106 ms when done inline).
fn release_start_up_pages() {
    const AFTER: Duration = Duration::from_secs(1);
    let spawned = std::thread::Builder::new()
        .name("loom-footprint".into())
        .spawn(|| crate::footprint::keep_idle_footprint_small(AFTER));
    if let Err(error) = spawned {
        tracing::debug!(%error, "start-up pages are kept");
    }
}

/// Serve `gateway` over stdin/stdout until the client goes away.
async fn serve_stdio(gateway: &std::sync::Arc<Gateway>) -> ExitCode {
    let transport = LineTransport::splicing(
        crate::wire::stdio::stdin(),
        crate::wire::stdio::stdout(),
        gateway.splice_table(),
        "client",
    )
    .with_initialize_patch(crate::gateway::tasks_capability_patch(gateway))
    .with_bypass(crate::gateway::direct::DirectLane::new(gateway.clone()));
    let service = match rmcp::serve_server(GatewayService::new(gateway.clone()), transport).await {
        Ok(service) => service,
        Err(error) => {
            tracing::error!("the client connection failed: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    gateway.upstream().set(service.peer().clone());
    // Cancelled when this future is dropped (a signal ended the select around it).
    let _stop = CancelOnDrop(Some(service.cancellation_token()));
    let _ = service.waiting().await;
    tracing::info!("the client closed the connection");
    ExitCode::SUCCESS
}

/// `--http ADDR` (and `--stdio`): the HTTP face, one session per client session, over one set
/// of servers; stops at a signal, or when the stdio client goes away if there is one.
async fn serve_http(config: crate::config::Config, addr: SocketAddr, stdio: bool) -> ExitCode {
    raise_file_limit();
    // Bound before any server starts: a taken port is reported at once.
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("loom: cannot listen on {addr}: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    if !local.ip().is_loopback() && !config.http.wants_token() {
        // Only with --allow-no-token (refused otherwise, in `run`).
        tracing::warn!(
            "listening on {local}, which is not loopback, without `http.token` (--allow-no-token): \
             anyone who can reach it can use every server behind loom"
        );
    }
    // With `http.auth` the face's subjects are people, each logging in to remote servers for
    // themselves (SPEC §4.7).
    let per_subject = config.http.auth.is_some();
    if let Some(auth) = &config.http.auth
        && auth.audience.is_none()
        && local.ip().is_unspecified()
    {
        eprintln!(
            "loom: `http.auth.audience` is needed when loom listens on {local}: set it to the \
             URL clients reach loom's MCP endpoint at (e.g. \"https://loom.example.com/mcp\"); \
             tokens are issued for it"
        );
        return ExitCode::from(EXIT_START);
    }
    let hub = match Hub::start_with(config, per_subject).await {
        Ok(hub) => hub,
        Err(error) => {
            eprintln!("loom: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    let server = crate::http::Server::new(hub.clone(), local);
    tracing::info!("serving MCP at http://{local}{}", crate::http::MCP_PATH);
    eprintln!(
        "loom: serving MCP at http://{local}{}",
        crate::http::MCP_PATH
    );
    register_instance(&hub, local).await;
    let running = tokio::spawn(server.clone().run(listener));
    let stdio_session = if stdio {
        match Gateway::session(hub.clone(), false).await {
            Ok(gateway) => {
                // The person at this machine, with the machine's logins (and datasets).
                gateway.enter(crate::gateway::LOCAL_CREDENTIAL).await;
                Some(gateway)
            }
            Err(error) => {
                eprintln!("loom: {error}");
                server.stop();
                let _ = running.await;
                hub.shutdown().await;
                return ExitCode::from(EXIT_START);
            }
        }
    } else {
        None
    };
    release_start_up_pages();
    let stdio_done = async {
        match &stdio_session {
            Some(gateway) => serve_stdio(gateway).await,
            None => std::future::pending().await,
        }
    };
    let code = tokio::select! {
        code = stdio_done => code,
        signal = shutdown_signal() => {
            tracing::info!("{signal}: shutting down");
            ExitCode::SUCCESS
        }
    };
    server.stop();
    if let Some(cluster) = hub.cluster() {
        // Nobody forwards to this instance any more; its waiting calls end with it.
        let _ = tokio::time::timeout(Duration::from_secs(1), cluster.unregister()).await;
    }
    let _ = running.await;
    if let Some(gateway) = &stdio_session {
        gateway.write_report();
        gateway.shutdown().await;
    }
    hub.shutdown().await;
    code
}

/// In a cluster, say in the store where the other instances reach this one (SPEC §25): they
/// forward to it the retries and task requests of what it holds. `cluster.advertise`, or the
/// address listened on when that is not a wildcard.
async fn register_instance(hub: &Hub, local: SocketAddr) {
    let Some(cluster) = hub.cluster() else {
        return;
    };
    let configured = hub
        .config()
        .cluster
        .as_ref()
        .and_then(|c| c.advertise.clone());
    let url = match configured {
        Some(url) => url,
        None if !local.ip().is_unspecified() => {
            format!("http://{local}{}", crate::http::MCP_PATH)
        }
        None => {
            tracing::warn!(
                "cluster.advertise is not set and loom listens on {local}: other instances \
                 cannot forward to this one, so a call waiting here for its client's input is \
                 made again from the start when its retry reaches another instance, and a task \
                 created here is unknown there; set cluster.advertise to the URL they reach \
                 this instance at"
            );
            return;
        }
    };
    match cluster.register(&url).await {
        Ok(()) => tracing::info!(%url, "this instance is reached at {url} by the cluster's others"),
        Err(error) => tracing::warn!("cannot tell the cluster where this instance is: {error}"),
    }
}

/// Descriptors the HTTP face asks for (the soft limit is raised toward it, never past the hard
/// limit): each connection holds one, and a common soft default of 1,024 ran out at 1,100 idle
/// connections while a legitimate request waited.
const WANTED_FILES: u64 = 65_536;

/// Raise the soft limit on open files toward [`WANTED_FILES`] (within the hard limit).
fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let wanted = WANTED_FILES.min(hard);
    if soft >= wanted {
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, wanted, hard) {
        Ok(()) => tracing::debug!("open files: soft limit raised from {soft} to {wanted}"),
        Err(error) => tracing::warn!(
            "open files: the soft limit stays {soft} ({error}); at most about that many \
             connections can be open at once"
        ),
    }
}

/// Stops the stdio service when the future serving it is dropped.
struct CancelOnDrop(Option<rmcp::service::RunningServiceCancellationToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

/// SIGINT or SIGTERM (Ctrl-C elsewhere).
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            _ => {
                let _ = tokio::signal::ctrl_c().await;
                "interrupt"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}
