//! `loom auth login|status|logout`: a person's logins to the remote servers of a configuration
//! (SPEC §4.7). Tokens are never printed.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{EXIT_CONFIG, EXIT_START};
use crate::config::{Config, OAuthSettings, ServerConfig, mask_url};
use crate::downstream::oauth::login::{self, LoginTarget, Probe};
use crate::downstream::oauth::store::{TokenStore, default_root};

pub(super) enum Action<'a> {
    Login(&'a str),
    Status,
    Logout(&'a str),
}

pub(super) fn run(config_path: &Path, action: Action<'_>) -> ExitCode {
    let config = match crate::config::load(config_path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let Some(root) = default_root(|name| std::env::var(name).ok()) else {
        eprintln!(
            "loom auth: neither XDG_STATE_HOME nor HOME is set, so there is no place to keep \
             logins; set one of them"
        );
        return ExitCode::from(EXIT_CONFIG);
    };
    let store = TokenStore::new(root);
    let Some(runtime) = super::runtime() else {
        return ExitCode::from(EXIT_START);
    };
    match action {
        Action::Login(name) => match oauth_server(&config, name) {
            Ok((server, url, settings)) => {
                let target = LoginTarget {
                    server: &server.name,
                    url,
                    settings,
                    store: &store,
                    subject: None,
                    face: None,
                };
                match runtime.block_on(login::login(&target, login::LOGIN_WAIT)) {
                    Ok(done) => {
                        eprintln!(
                            "loom: logged in to `{}`{}{}{}",
                            server.name,
                            done.issuer.map(|i| format!(" at {i}")).unwrap_or_default(),
                            scopes_text(&done.scopes),
                            done.expires_in
                                .map(|d| format!(", access token expires in {}", duration_text(d)))
                                .unwrap_or_default()
                        );
                        ExitCode::SUCCESS
                    }
                    Err(error) => {
                        eprintln!("loom auth login {name}: {error}");
                        ExitCode::from(EXIT_START)
                    }
                }
            }
            Err(error) => {
                eprintln!("loom auth login: {error}");
                ExitCode::from(EXIT_CONFIG)
            }
        },
        Action::Logout(name) => match oauth_server(&config, name) {
            Ok((server, url, _)) => match store.remove(url, None) {
                Ok(true) => {
                    eprintln!("loom: logged out of `{}`", server.name);
                    ExitCode::SUCCESS
                }
                Ok(false) => {
                    eprintln!("loom: not logged in to `{}`; nothing to do", server.name);
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("loom auth logout {name}: {}", error.0);
                    ExitCode::from(EXIT_START)
                }
            },
            Err(error) => {
                eprintln!("loom auth logout: {error}");
                ExitCode::from(EXIT_CONFIG)
            }
        },
        Action::Status => {
            for server in &config.servers {
                let Some(remote) = server.remote_server() else {
                    continue;
                };
                let state =
                    runtime.block_on(status_of(&store, &remote.url, remote.oauth.is_some()));
                println!("{}\t{}\t{state}", server.name, mask_url(&remote.url));
            }
            ExitCode::SUCCESS
        }
    }
}

/// The remote server `name` that may be logged in to, with its URL and settings.
fn oauth_server<'c>(
    config: &'c Config,
    name: &str,
) -> Result<(&'c ServerConfig, &'c str, &'c OAuthSettings), String> {
    let remote_names: Vec<&str> = config
        .servers
        .iter()
        .filter(|s| s.remote_server().is_some())
        .map(|s| s.name.as_str())
        .collect();
    let Some(server) = config.servers.iter().find(|s| s.name == name) else {
        return Err(format!(
            "no server `{name}` in the configuration; remote servers: {}",
            if remote_names.is_empty() {
                "(none)".to_owned()
            } else {
                remote_names.join(", ")
            }
        ));
    };
    let Some(remote) = server.remote_server() else {
        return Err(format!(
            "`{name}` is a server loom starts (with `command`); only remote servers (`url`) \
             take a login"
        ));
    };
    let Some(settings) = &remote.oauth else {
        return Err(format!(
            "`{name}` sends its own `Authorization` header or has \"oauth\": false; remove that \
             to log in with OAuth"
        ));
    };
    Ok((server, remote.url.as_str(), settings))
}

/// One server's line in `loom auth status`.
async fn status_of(store: &TokenStore, url: &str, oauth: bool) -> String {
    if !oauth {
        return "oauth off (own Authorization header or \"oauth\": false)".to_owned();
    }
    match store.load(url, None) {
        Err(error) => format!("unusable login: {}", error.0),
        Ok(Some(stored)) if stored.token_response.is_some() => {
            let refreshes = login::can_refresh(&stored);
            let expiry = match login::remaining(&stored) {
                Some(left) if left.is_zero() && refreshes => {
                    ", access token expired (refreshed on next use)".to_owned()
                }
                Some(left) if left.is_zero() => {
                    ", access token expired and cannot be refreshed: log in again".to_owned()
                }
                Some(left) => format!(", expires in {}", duration_text(left)),
                None => String::new(),
            };
            format!("authorized{expiry}{}", scopes_text(&stored.granted_scopes))
        }
        Ok(_) => match login::probe(url).await {
            Ok(Probe::Protected(_)) => "needs login".to_owned(),
            Ok(Probe::Open) => "not protected".to_owned(),
            Err(error) => format!("unknown ({error})"),
        },
    }
}

fn scopes_text(scopes: &[String]) -> String {
    if scopes.is_empty() {
        String::new()
    } else {
        format!(", scopes {}", scopes.join(" "))
    }
}

fn duration_text(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        _ => format!("{} h {} min", secs / 3600, (secs % 3600) / 60),
    }
}
