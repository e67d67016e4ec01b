//! The `loom` binary: arguments in, exit code out. Everything else lives in the library.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    loom::cli::run()
}
