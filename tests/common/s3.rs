//! A real S3-compatible server (moto, from `.ci/venv-data`, made by `.ci/setup-data`) on
//! loopback, one per test binary, plus the few raw S3 calls the tests need (make a bucket, delete
//! an object). Without the venv a test fails when every test is required (`.ci/test` sets
//! `LOOM_STRICT_TESTS=1`; `CI` set counts too) and otherwise is skipped with a loud notice.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

pub const SETUP_HINT: &str = "run `bash .ci/test` (README's test command: installs everything and runs every test) or \
     `bash .ci/setup-data` (installs .ci/venv-data)";

/// Credentials moto accepts; the secret is distinctive so tests can look for leaks.
pub const ACCESS_KEY: &str = "AKIALOOMTESTKEY";
pub const SECRET_KEY: &str = "loom-test-secret-6f1d2c";

pub struct Moto {
    pub port: u16,
    /// For a locked server: the keys of a user that may do nothing.
    pub keys: Option<(String, String)>,
    /// Holding its stdin open keeps it serving; the server exits when this process does.
    _child: Mutex<Child>,
}

/// Whether every test must run: under `.ci/test` (`LOOM_STRICT_TESTS=1`) or CI (`CI` set).
pub fn in_ci() -> bool {
    let set = |name: &str| {
        std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
    };
    set("LOOM_STRICT_TESTS") || set("CI")
}

pub fn data_python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/venv-data/bin/python")
}

/// The server, started on first use; `None` (after a notice) when `.ci/venv-data` is missing
/// outside CI.
pub fn moto() -> Option<&'static Moto> {
    static MOTO: OnceLock<Option<Moto>> = OnceLock::new();
    MOTO.get_or_init(|| start(false)).as_ref()
}

/// A second server that authenticates requests: bucket `locked`, and in `keys` a user with no
/// permission at all.
pub fn locked_moto() -> Option<&'static Moto> {
    static MOTO: OnceLock<Option<Moto>> = OnceLock::new();
    MOTO.get_or_init(|| start(true)).as_ref()
}

fn start(locked: bool) -> Option<Moto> {
    {
        let python = data_python();
        if !python.exists() {
            assert!(!in_ci(), "{} is missing: {SETUP_HINT}", python.display());
            eprintln!(
                "\n*** S3 tests SKIPPED: {} is missing; {SETUP_HINT} ***\n",
                python.display()
            );
            return None;
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/engines/moto_server.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args(if locked { &["--locked"][..] } else { &[][..] })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto");
        let stdout = child.stdout.take().expect("moto stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("moto's port");
        let mut words = line.split_whitespace();
        let port: u16 = words
            .next()
            .and_then(|p| p.parse().ok())
            .expect("moto printed its port");
        let keys = match (words.next(), words.next()) {
            (Some(id), Some(secret)) => Some((id.to_string(), secret.to_string())),
            _ => None,
        };
        Some(Moto {
            port,
            keys,
            _child: Mutex::new(child),
        })
    }
}

impl Moto {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a loom process needs to use this server.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
        ]
    }

    /// One unsigned S3 request (moto accepts them); the status code and body.
    pub fn request(&self, method: &str, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to moto");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, answer)
    }

    /// A signed call through boto3 (tests/engines/s3_object.py): `get`, `delete` or `keys`.
    pub fn object(&self, action: &str, bucket: &str, key: &str) -> String {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/engines/s3_object.py");
        let out = Command::new(data_python())
            .arg(script)
            .args([action, bucket, key])
            .envs(self.env())
            .output()
            .expect("run s3_object.py");
        assert!(
            out.status.success(),
            "{action} {bucket}/{key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A new bucket with a name of its own.
    pub fn bucket(&self, name: &str) -> String {
        let (status, answer) = self.request("PUT", &format!("/{name}"));
        assert_eq!(status, 200, "create bucket {name}: {answer}");
        name.to_string()
    }
}
