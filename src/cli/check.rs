//! `loom check`: validate a configuration without starting anything.

use std::path::Path;
use std::process::ExitCode;

use super::EXIT_CONFIG;

pub(super) fn run(path: &Path) -> ExitCode {
    match crate::config::load(path) {
        Ok(config) => {
            // The one part checked beyond the file: a cluster's store must be reachable and
            // writable, and set up with the same secret (SPEC §25).
            let store = match &config.cluster {
                Some(cluster) => match inspect_cluster(cluster) {
                    Ok(line) => Some(line),
                    Err(error) => {
                        eprintln!("{}: {error}", path.display());
                        return ExitCode::from(EXIT_CONFIG);
                    }
                },
                None => None,
            };
            println!("configuration {} is valid\n", path.display());
            println!("{}", config.describe_masked());
            if let Some(line) = store {
                println!("\ncluster store {line}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn inspect_cluster(cluster: &crate::config::ClusterConfig) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot check cluster.store: {e}"))?;
    runtime.block_on(crate::cluster::Cluster::inspect(cluster))
}
