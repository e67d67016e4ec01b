//! Command-line entry points. `main.rs` calls [`run`] and nothing else.

mod auth;
mod check;
mod query;
mod serve;
mod snapshots;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for a configuration that cannot be used (as `loom check` and `loom` report it).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code when loom cannot serve (no server could start, stdio unusable).
pub const EXIT_START: u8 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "loom",
    version,
    about = "A context gateway for the Model Context Protocol: one stdio MCP server in front of many",
    long_about = None,
)]
pub struct Cli {
    /// Configuration file (else $LOOM_CONFIG, else ./loom.config.json).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464) while serving MCP.
    #[arg(long, global = true, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP in front of the configured servers: over stdio (the default), or over
    /// Streamable HTTP at http://ADDR/mcp with --http.
    Serve {
        /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8808) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// With --http: serve stdio as well.
        #[arg(long, requires = "http")]
        stdio: bool,
        /// With --http on an address that is not loopback: serve without `http.token` (only
        /// when something in front of loom authenticates its clients).
        #[arg(long, requires = "http")]
        allow_no_token: bool,
    },
    /// Validate the configuration and print the resolved servers (secrets masked); starts nothing.
    Check,
    /// Query a session snapshot with the same sealed engine (read-only SQL).
    Query {
        /// Snapshot root: a directory, or a file://, memory:// or s3:// URL.
        #[arg(long, value_name = "PATH|URL")]
        snapshot: String,
        /// Session to open (default: the latest under the root).
        #[arg(long)]
        session: Option<String>,
        /// Every session under the root as one catalog: `loom_catalog` (every dataset of every
        /// session with its provenance) and one table per ref family across sessions
        /// (`ds_crm_rows`, `doc`, …) with session_id, ref, server, tool and created_at columns.
        #[arg(long, conflicts_with = "session")]
        all_sessions: bool,
        /// Output format for query results.
        #[arg(long, value_enum, default_value = "table")]
        format: query::OutputFormat,
        /// List the session's datasets with rows, schema and provenance.
        #[arg(long, conflicts_with_all = ["describe", "sql"])]
        list: bool,
        /// Describe one dataset (schema, statistics, sample, provenance).
        #[arg(long, value_name = "REF", conflicts_with = "sql")]
        describe: Option<String>,
        /// One read-only SQL statement.
        sql: Option<String>,
    },
    /// Housekeeping for a snapshot root: list its sessions, collect old ones.
    Snapshots {
        #[command(subcommand)]
        action: SnapshotsCommand,
    },
    /// See loom work in one command: two demo servers, a large result, a join, an export.
    Demo {
        /// Keep the demo's export in this directory (default: a temporary one).
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
        /// Snapshot the session to Parquet under DIR and re-open it with `loom query`.
        #[arg(long, value_name = "DIR")]
        snapshot: Option<PathBuf>,
    },
    /// Log in to the remote servers that ask for OAuth, see the logins, log out.
    Auth {
        #[command(subcommand)]
        action: AuthCommand,
    },
    /// A demo MCP server (`crm` or `shop`) served over stdio; used by `loom demo`.
    #[command(hide = true)]
    DemoServer { kind: String },
}

#[derive(Debug, Subcommand)]
pub enum SnapshotsCommand {
    /// Every session under the root: created, age since its last write, datasets, rows, bytes,
    /// whether its snapshot is complete.
    List {
        /// Snapshot root (default: `snapshot.url` of the configuration).
        #[arg(long, value_name = "PATH|URL")]
        snapshot: Option<String>,
    },
    /// Sessions last written longer ago than --older-than; shown only, unless --delete.
    Gc {
        /// Snapshot root (default: `snapshot.url` of the configuration).
        #[arg(long, value_name = "PATH|URL")]
        snapshot: Option<String>,
        /// Age since a session's last write, e.g. 30d, 12h, 2w.
        #[arg(long, value_name = "AGE")]
        older_than: String,
        /// Delete them (without it nothing is deleted).
        #[arg(long)]
        delete: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Log in to SERVER: prints the authorization page's URL on stderr and opens it with
    /// $BROWSER (else the platform's opener), then waits for the redirect to 127.0.0.1.
    Login { server: String },
    /// One line per remote server: authorized (expiry, scopes), needs login, not protected.
    Status,
    /// Forget the login to SERVER.
    Logout { server: String },
}

/// The root given, else the configuration's `snapshot.url`.
fn snapshot_root(given: Option<String>, config_path: &std::path::Path) -> Result<String, String> {
    if let Some(root) = given {
        return Ok(root);
    }
    match crate::config::load(config_path) {
        Ok(config) => config.snapshot.map(|s| s.url).ok_or_else(|| {
            format!(
                "give --snapshot ROOT, or set snapshot.url in {}",
                config_path.display()
            )
        }),
        Err(error) => Err(format!(
            "give --snapshot ROOT (the configuration {} cannot be read: {error})",
            config_path.display()
        )),
    }
}

/// Parse arguments and run.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    // The demo and its servers find no config: they are self-contained.
    let config_path = crate::config::resolve_path(
        cli.config.as_deref(),
        std::env::var(crate::config::CONFIG_ENV_VAR).ok(),
    );
    let default = Command::Serve {
        http: None,
        stdio: false,
        allow_no_token: false,
    };
    match cli.command.unwrap_or(default) {
        Command::Serve {
            http,
            stdio,
            allow_no_token,
        } => serve::run(
            &config_path,
            serve::Faces {
                http,
                stdio,
                allow_no_token,
                metrics: cli.metrics,
            },
        ),
        Command::Check => check::run(&config_path),
        Command::Demo { keep, snapshot } => demo(keep.as_deref(), snapshot.as_deref()),
        Command::Query {
            snapshot,
            session,
            all_sessions,
            format,
            list,
            describe,
            sql,
        } => {
            let action = match (list, describe.as_deref(), sql.as_deref()) {
                (true, _, _) => query::Action::List,
                (_, Some(reference), _) => query::Action::Describe(reference),
                (_, _, Some(sql)) => query::Action::Sql(sql, format),
                _ => {
                    eprintln!("loom query: give a SQL statement, --list or --describe REF");
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            let sessions = if all_sessions {
                query::Sessions::All
            } else {
                query::Sessions::One(session.as_deref())
            };
            query::run(&snapshot, sessions, action)
        }
        Command::Snapshots { action } => {
            let (given, action) = match action {
                SnapshotsCommand::List { snapshot } => (snapshot, Ok(snapshots::Action::List)),
                SnapshotsCommand::Gc {
                    snapshot,
                    older_than,
                    delete,
                } => (
                    snapshot,
                    snapshots::parse_age(&older_than)
                        .map(|older_than| snapshots::Action::Gc { older_than, delete }),
                ),
            };
            match (snapshot_root(given, &config_path), action) {
                (Ok(root), Ok(action)) => snapshots::run(&root, action),
                (Err(error), _) | (_, Err(error)) => {
                    eprintln!("loom snapshots: {error}");
                    ExitCode::from(EXIT_CONFIG)
                }
            }
        }
        Command::Auth { action } => {
            let action = match &action {
                AuthCommand::Login { server } => auth::Action::Login(server),
                AuthCommand::Status => auth::Action::Status,
                AuthCommand::Logout { server } => auth::Action::Logout(server),
            };
            auth::run(&config_path, action)
        }
        Command::DemoServer { kind } => demo_server(&kind),
    }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            eprintln!("loom: cannot start the async runtime: {error}");
            None
        }
    }
}

fn demo(keep: Option<&std::path::Path>, snapshot: Option<&std::path::Path>) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_START);
    };
    let loom = match std::env::current_exe() {
        Ok(path) => path,
        Err(error) => {
            eprintln!("loom demo: cannot find the loom binary: {error}");
            return ExitCode::from(EXIT_START);
        }
    };
    match runtime.block_on(crate::demo::run(&loom, keep, snapshot)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("loom demo: {error}");
            ExitCode::from(EXIT_START)
        }
    }
}

fn demo_server(kind: &str) -> ExitCode {
    let Some(kind) = crate::demo::servers::Kind::parse(kind) else {
        eprintln!("loom demo-server: unknown kind `{kind}`; expected `crm` or `shop`");
        return ExitCode::from(EXIT_CONFIG);
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_START);
    };
    let outcome = runtime.block_on(crate::demo::servers::serve(kind));
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(EXIT_START)
        }
    }
}

/// Logs go to stderr only (stdout carries the protocol). Level from `LOOM_LOG`
/// (`tracing_subscriber` filter syntax), default `info` for loom and `warn` for libraries; rmcp's
/// transports are silent by default, because loom reports every transport failure itself.
/// rmcp's OAuth client writes the authorization code (and the client's registration) at debug
/// level: whatever `LOOM_LOG` asks, it says no more than `info`, so no credential reaches a log.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = match EnvFilter::try_from_env("LOOM_LOG") {
        Ok(asked) => match "rmcp::transport::auth=info".parse() {
            Ok(quiet) => asked.add_directive(quiet),
            Err(_) => asked,
        },
        Err(_) => EnvFilter::new("warn,rmcp=error,rmcp::transport=off,loom=info"),
    };
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter);
    // The OpenTelemetry layer is there from the start and exports nothing until `serve` turns
    // tracing on (src/telemetry/trace.rs).
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(crate::telemetry::trace::layer())
        .try_init();
}
