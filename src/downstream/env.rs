//! The exact environment a downstream server starts with. Default-deny: a child sees the handful
//! of variables every program needs to run, the names its config passes through, and its own
//! `env` block — never loom's whole environment (which holds the user's other secrets).

use std::ffi::OsString;

use crate::config::ServerConfig;

/// Variables every child gets when loom has them. On Windows the list is what a process needs to
/// find its system directories, temp folder and profile.
#[cfg(not(windows))]
pub(crate) const BASE_VARIABLES: &[&str] = &[
    "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
];
#[cfg(windows)]
pub const BASE_VARIABLES: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
    "HOMEDRIVE",
    "HOMEPATH",
];

/// The child's full environment, in the order it is applied: base variables, then
/// `envPassthrough`, then the server's own `env` block (which wins over both).
pub(crate) fn child_environment(
    server: &ServerConfig,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |key: OsString, value: OsString| {
        if let Some(slot) = out.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            out.push((key, value));
        }
    };
    for name in BASE_VARIABLES
        .iter()
        .copied()
        .chain(server.env_passthrough.iter().map(String::as_str))
    {
        if let Some(value) = lookup(name) {
            set(OsString::from(name), value);
        }
    }
    for (key, value) in &server.env {
        set(OsString::from(key), OsString::from(value));
    }
    out
}

/// [`child_environment`] over loom's real environment.
pub(crate) fn child_environment_from_process(server: &ServerConfig) -> Vec<(OsString, OsString)> {
    child_environment(server, &|name| std::env::var_os(name))
}
