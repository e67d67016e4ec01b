//! `loom` / `loom serve`: the gateway over stdio until the client goes away or a signal arrives.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{EXIT_CONFIG, EXIT_START};
use crate::gateway::{Gateway, GatewayService};
use crate::wire::LineTransport;

pub fn run(path: &Path) -> ExitCode {
    let config = match crate::config::load(path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loom: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    let code = runtime.block_on(serve(config));
    // Reading stdin parks a blocking thread that only returns at EOF; after a signal it may
    // still be parked, and it must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn serve(config: crate::config::Config) -> ExitCode {
    let gateway = match Gateway::start(config).await {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("loom: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    let transport = LineTransport::splicing(
        tokio::io::stdin(),
        tokio::io::stdout(),
        gateway.splice_table(),
        "client",
    )
    .with_initialize_patch({
        // rmcp's typed capabilities have no 2025-11-25 `tasks` member; loom declares it when a
        // server behind it offers task-augmented tools (SPEC §5.10).
        // Weak: the transport may outlive `serve` for a moment at exit, and the gateway (its
        // store, its private spill directory) must be dropped when `serve` ends.
        let gateway = std::sync::Arc::downgrade(&gateway);
        std::sync::Arc::new(move |result: &mut serde_json::Value| {
            let version = result
                .get("protocolVersion")
                .and_then(serde_json::Value::as_str);
            if crate::gateway::era::Era::has_tasks(version)
                && gateway
                    .upgrade()
                    .is_some_and(|gateway| gateway.offers_tasks())
                && let Some(capabilities) = result
                    .get_mut("capabilities")
                    .and_then(serde_json::Value::as_object_mut)
            {
                capabilities.insert("tasks".into(), crate::gateway::tasks::capability());
            }
        })
    });
    let service = match rmcp::serve_server(GatewayService::new(gateway.clone()), transport).await {
        Ok(service) => service,
        Err(error) => {
            tracing::error!("the client connection failed: {error}");
            gateway.shutdown().await;
            return ExitCode::from(EXIT_START);
        }
    };
    gateway.upstream().set(service.peer().clone());
    let service_ct = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => tracing::info!("the client closed the connection"),
        signal = shutdown_signal() => {
            tracing::info!("{signal}: shutting down");
            service_ct.cancel();
        }
    }
    gateway.shutdown().await;
    gateway.write_report();
    ExitCode::SUCCESS
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
