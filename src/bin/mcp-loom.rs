//! `mcp-loom`: the command `uvx mcp-loom` runs (uv runs the executable named after the package,
//! and loom's is `loom`). It hands over to the `loom` installed beside it — same arguments,
//! environment and stdio, the process itself replaced — so it costs a few hundred KB in the wheel
//! instead of a second copy of loom.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let loom = match beside_me() {
        Ok(path) => path,
        Err(error) => {
            eprintln!("mcp-loom: cannot find loom beside this program: {error}");
            return ExitCode::from(1);
        }
    };
    let mut command = Command::new(&loom);
    command.args(std::env::args_os().skip(1));
    run(command, &loom)
}

/// `loom` in this executable's own directory (both are installed into one `bin/`).
fn beside_me() -> std::io::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let loom = me.with_file_name("loom");
    if loom.is_file() {
        Ok(loom)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} does not exist", loom.display()),
        ))
    }
}

#[cfg(unix)]
fn run(mut command: Command, loom: &std::path::Path) -> ExitCode {
    use std::os::unix::process::CommandExt;
    // exec only returns when it failed.
    let error = command.arg0("loom").exec();
    eprintln!("mcp-loom: cannot run {}: {error}", loom.display());
    ExitCode::from(1)
}

#[cfg(not(unix))]
fn run(mut command: Command, loom: &std::path::Path) -> ExitCode {
    match command.status() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1),
        ),
        Err(error) => {
            eprintln!("mcp-loom: cannot run {}: {error}", loom.display());
            ExitCode::from(1)
        }
    }
}
