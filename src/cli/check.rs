//! `loom check`: validate a configuration without starting anything.

use std::path::Path;
use std::process::ExitCode;

use super::EXIT_CONFIG;

pub(super) fn run(path: &Path) -> ExitCode {
    match crate::config::load(path) {
        Ok(config) => {
            println!("configuration {} is valid\n", path.display());
            println!("{}", config.describe_masked());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}
