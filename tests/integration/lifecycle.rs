//! Start, supervision and shutdown of loom and its children, the child environment, and the
//! `loom check` command.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

fn child_pid(loom: &mut RawClient, tool: &str) -> u32 {
    let line = loom.call_tool(tool, json!({}));
    first_text(&line).trim().parse().expect("a pid")
}

#[test]
fn the_child_environment_is_exactly_base_passthrough_and_env_block() {
    let mut server = fixture_server("fx", &[]);
    server["envPassthrough"] = json!(["LOOM_TEST_PASSED"]);
    server["env"] = json!({"OWN_SETTING": "from-config", "LANG": "C"});
    let (_dir, path) = write_config(&json!({ "servers": [server] }));
    let mut loom = RawClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &[
            ("LOOM_TEST_PASSED", "yes"),
            ("LOOM_TEST_SECRET", "must-not-leak"),
            ("SHELL", "/bin/secret-shell"),
            ("USER", "someone"),
            ("LOGNAME", "someone"),
            ("AWS_SECRET_ACCESS_KEY", "nope"),
            ("TZ", "UTC"),
        ],
    );
    loom.initialize();
    let line = loom.call_tool("fx_env", json!({}));
    let env: BTreeMap<String, String> = serde_json::from_str(&first_text(&line)).expect("json");
    let mut expected: Vec<&str> = vec!["LOOM_TEST_PASSED", "OWN_SETTING", "LANG", "TZ"];
    for base in ["PATH", "HOME", "TMPDIR", "LC_ALL", "LC_CTYPE", "TERM"] {
        if std::env::var_os(base).is_some() {
            expected.push(base);
        }
    }
    expected.sort_unstable();
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, expected, "the child saw {env:?}");
    assert_eq!(env["LOOM_TEST_PASSED"], "yes");
    assert_eq!(env["OWN_SETTING"], "from-config");
    assert_eq!(
        env["LANG"], "C",
        "the env block wins over the base variables"
    );
}

#[test]
fn stdin_eof_stops_loom_and_every_child_even_a_lingering_one() {
    let (_dir, path) = write_config(&json!({"servers": [
        fixture_server("polite", &[]),
        // Ignores stdin EOF for 10 s and ignores SIGTERM: only SIGKILL stops it.
        fixture_server("stubborn", &["--linger-ms", "10000", "--ignore-sigterm"]),
    ]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let polite = child_pid(&mut loom, "polite_pid");
    let stubborn = child_pid(&mut loom, "stubborn_pid");
    assert!(pid_alive(polite) && pid_alive(stubborn));
    loom.close_stdin();
    let status = loom.wait_exit();
    assert!(status.success(), "{status:?}\n{}", loom.stderr_text());
    assert!(!pid_alive(polite), "orphaned polite child {polite}");
    assert!(!pid_alive(stubborn), "orphaned stubborn child {stubborn}");
    assert!(
        loom.stderr_text().contains("after SIGKILL"),
        "{}",
        loom.stderr_text()
    );
}

#[test]
fn calls_in_flight_when_stdin_closes_are_still_answered() {
    // A scripted client writes its requests and closes stdin at once: the answers still come.
    let (_dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let slow = loom.request(
        "tools/call",
        json!({"name": "fx_slow", "arguments": {"ms": 400}}),
    );
    let echo = loom.request(
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"text": "last words"}}),
    );
    loom.close_stdin();
    let echoed = loom.response(echo);
    assert_eq!(
        echoed.value["result"]["content"][0]["text"], "last words",
        "{}",
        echoed.raw
    );
    let slow = loom.response(slow);
    assert!(slow.value["result"].is_object(), "{}", slow.raw);
    assert_ne!(slow.value["result"]["isError"], true, "{}", slow.raw);
    let status = loom.wait_exit();
    assert!(status.success(), "{status:?}\n{}", loom.stderr_text());
}

#[test]
fn sigterm_and_sigint_stop_loom_and_its_children() {
    for signal in ["-TERM", "-INT"] {
        let (_dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
        let mut loom = RawClient::loom(&path);
        loom.initialize();
        let child = child_pid(&mut loom, "fx_pid");
        let status = Command::new("kill")
            .args([signal, &loom.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let status = loom.wait_exit();
        assert!(
            status.success(),
            "{signal}: {status:?}\n{}",
            loom.stderr_text()
        );
        assert!(!pid_alive(child), "{signal}: orphaned child {child}");
    }
}

#[test]
fn loom_exits_non_zero_with_every_reason_when_no_server_can_start() {
    let (_dir, path) = write_config(
        &json!({"restart": {"maxAttempts": 1, "baseDelayMs": 10}, "servers": [
            fixture_server("first", &["--fail-start"]),
            {"name": "second", "command": "/no/such/program"},
        ]}),
    );
    let mut loom = RawClient::loom(&path);
    let status = loom.wait_exit();
    assert_eq!(status.code(), Some(1));
    let log = loom.stderr_text();
    assert!(log.contains("no server could start"), "{log}");
    assert!(
        log.contains("first") && log.contains("exited with code 3"),
        "{log}"
    );
    assert!(
        log.contains("second") && log.contains("/no/such/program"),
        "{log}"
    );
}

#[test]
fn loom_starts_with_the_servers_that_work_and_warns_about_the_rest() {
    let (_dir, path) = write_config(
        &json!({"restart": {"maxAttempts": 1, "baseDelayMs": 10}, "servers": [
            fixture_server("good", &[]),
            fixture_server("bad", &["--fail-start"]),
        ]}),
    );
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let names = loom.tool_names();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("good_") || n.starts_with("loom_")),
        "{names:?}"
    );
    eventually("the failed server is named in the log", || {
        loom.stderr_text().contains("bad")
    });
}

#[test]
fn a_crashed_server_is_restarted_and_its_tools_stay_listed_meanwhile() {
    let (_dir, path) = write_config(&json!({
        "restart": {"maxAttempts": 5, "baseDelayMs": 400},
        "servers": [fixture_server("fx", &[])]
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let before = child_pid(&mut loom, "fx_pid");
    let line = loom.call_tool("fx_crash", json!({"code": 9}));
    assert_eq!(line.value["result"]["isError"], true, "{}", line.raw);
    assert!(first_text(&line).contains("`fx`"), "{}", line.raw);
    // While it is down its tools stay listed and calls say why they cannot run.
    assert!(loom.tool_names().contains(&"fx_echo".to_string()));
    let line = loom.call_tool("fx_echo", json!({"text": "x"}));
    if line.value["result"]["isError"] == true {
        let text = first_text(&line);
        assert!(
            text.contains("`fx`") && text.contains("restarting"),
            "{text}"
        );
    }
    eventually("the server is back", || {
        let line = loom.call_tool("fx_echo", json!({"text": "back"}));
        line.value["result"]["content"][0]["text"] == "back"
    });
    let after = child_pid(&mut loom, "fx_pid");
    assert_ne!(before, after);
    assert!(
        loom.stderr_text().contains("exited with code 9"),
        "{}",
        loom.stderr_text()
    );
}

#[test]
fn a_crash_loop_is_delisted_after_max_attempts_and_announced() {
    let (_dir, path) = write_config(&json!({
        "restart": {"maxAttempts": 3, "baseDelayMs": 50},
        "servers": [
            fixture_server("steady", &[]),
            // Handshakes fine, then dies: never stays up long enough to count as recovered.
            fixture_server("flaky", &["--exit-after-ms", "600"]),
        ]
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    assert!(loom.tool_names().iter().any(|n| n.starts_with("flaky_")));
    loom.wait_for("tools/list_changed after delisting", |v| {
        v["method"] == "notifications/tools/list_changed"
    });
    eventually("flaky is delisted", || {
        !loom.tool_names().iter().any(|n| n.starts_with("flaky_"))
    });
    assert!(loom.tool_names().iter().any(|n| n.starts_with("steady_")));
    let log = loom.stderr_text();
    assert!(log.contains("failed and delisted"), "{log}");
    // No further restarts after giving up.
    let starts = log.matches("server=flaky state=healthy").count();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        loom.stderr_text()
            .matches("server=flaky state=healthy")
            .count(),
        starts
    );
    assert_eq!(starts, 3, "{log}");
}

#[test]
fn check_prints_the_resolved_servers_with_secrets_masked() {
    let mut server = fixture_server(
        "fx",
        &["--token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
    );
    server["env"] = json!({"API_KEY": "super-secret-value"});
    let (_dir, path) = write_config(&json!({ "servers": [server] }));
    let out = Command::new(loom_bin())
        .args(["check", "--config", path.to_str().expect("utf8")])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("fx") && stdout.contains("API_KEY"),
        "{stdout}"
    );
    assert!(!stdout.contains("super-secret-value"), "{stdout}");
    assert!(
        !stdout.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{stdout}"
    );
}

#[test]
fn bad_configurations_exit_two_naming_every_problem() {
    let (_dir, path) = write_config(&json!({
        "tokenTreshold": 5000,
        "servers": [{"name": "Bad Name", "command": ""}, {"name": "loom", "command": "x"}]
    }));
    for args in [vec!["check"], vec![]] {
        let mut all = args.clone();
        all.extend(["--config", path.to_str().expect("utf8")]);
        let out = Command::new(loom_bin()).args(&all).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "stdout belongs to the protocol");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for needle in [
            "tokenThreshold",
            "servers[0].name",
            "servers[0].command",
            "servers[1].name",
        ] {
            assert!(
                stderr.contains(needle),
                "{args:?}: missing {needle} in\n{stderr}"
            );
        }
    }
    let broken = path.with_file_name("broken.json");
    std::fs::write(
        &broken,
        "{\n  \"servers\": [\n    {\"name\": \"a\",}\n  ]\n}\n",
    )
    .expect("write");
    let out = Command::new(loom_bin())
        .args(["check", "--config", broken.to_str().expect("utf8")])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 3"), "{stderr}");
}

#[test]
fn the_config_path_comes_from_the_flag_then_the_environment_then_the_working_directory() {
    let (dir, path) = write_config(&json!({"servers": [fixture_server("fromfile", &[])]}));
    let run = |args: &[&str], env: Option<&str>| -> Value {
        let mut command = Command::new(loom_bin());
        command
            .args(args)
            .current_dir(dir.path())
            .env_remove("LOOM_CONFIG");
        if let Some(env) = env {
            command.env("LOOM_CONFIG", env);
        }
        let out = command.output().expect("run");
        json!({"code": out.status.code(), "out": String::from_utf8_lossy(&out.stdout), "err": String::from_utf8_lossy(&out.stderr)})
    };
    // ./loom.config.json
    let found = run(&["check"], None);
    assert_eq!(found["code"], 0, "{found}");
    // LOOM_CONFIG beats the working directory.
    let env = run(&["check"], Some("/nonexistent/loom.json"));
    assert_eq!(env["code"], 2, "{env}");
    assert!(
        env["err"]
            .as_str()
            .is_some_and(|e| e.contains("/nonexistent/loom.json"))
    );
    // --config beats LOOM_CONFIG.
    let flag = run(
        &["check", "--config", path.to_str().expect("utf8")],
        Some("/nonexistent/loom.json"),
    );
    assert_eq!(flag["code"], 0, "{flag}");
}

#[test]
fn the_private_spill_directory_is_removed_at_exit() {
    for how in ["stdin EOF", "SIGTERM"] {
        let (_dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
        let tmp = tempfile::tempdir().expect("tmp");
        let spill_dirs = || -> Vec<String> {
            std::fs::read_dir(tmp.path())
                .expect("read")
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("loom-spill-"))
                .collect()
        };
        let mut loom = RawClient::spawn(
            &loom_bin(),
            &["--config", path.to_str().expect("utf8")],
            &[("TMPDIR", tmp.path().to_str().expect("utf8"))],
        );
        loom.initialize();
        assert_eq!(
            spill_dirs().len(),
            1,
            "one private spill directory while running"
        );
        if how == "SIGTERM" {
            let status = Command::new("kill")
                .args(["-TERM", &loom.child.id().to_string()])
                .status()
                .expect("kill");
            assert!(status.success());
        } else {
            loom.close_stdin();
        }
        assert!(loom.wait_exit().success(), "{how}");
        assert!(
            spill_dirs().is_empty(),
            "{how}: left behind {:?}",
            spill_dirs()
        );
    }
}

/// A server that exits at once on stdin EOF but leaves a process it started behind (in its
/// process group): loom's shutdown still stops that process (issue 12).
#[test]
fn what_a_server_started_does_not_outlive_it_when_it_exits_first() {
    let dir = tempfile::tempdir().expect("dir");
    let pid_file = dir.path().join("grandchild.pid");
    let script = format!(
        "sleep 600 & echo $! > '{}'; exec '{}' --name wrapped",
        pid_file.display(),
        fixture_bin().display()
    );
    let (_config_dir, path) = write_config(&json!({"servers": [
        {"name": "wrapped", "command": "/bin/sh", "args": ["-c", script]},
    ]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let server = child_pid(&mut loom, "wrapped_pid");
    let mut grandchild = None;
    eventually("the wrapper wrote the pid of what it started", || {
        grandchild = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        grandchild.is_some()
    });
    let grandchild = grandchild.expect("pid");
    assert!(pid_alive(server) && pid_alive(grandchild));
    loom.close_stdin();
    let status = loom.wait_exit();
    assert!(status.success(), "{status:?}\n{}", loom.stderr_text());
    assert!(!pid_alive(server), "the server {server} outlived loom");
    eventually("the grandchild is stopped", || !pid_alive(grandchild));
}

/// Peak resident memory of a process, in MiB (`VmHWM`).
#[test]
fn a_plain_calls_log_lines_arrive_before_its_answer() {
    // Directly, a server's log lines for a call come before the call's answer (one pipe, in
    // order). Through loom the lines wait in the client's outbox while a plain call's answer
    // takes the direct lane: the answer waits for what was queued before it (SPEC §5.9).
    const LINES: usize = 400;
    let (_dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    for round in 0..3 {
        let answer = loom.call_tool("fx_logs", json!({"count": LINES, "bytes": 2000}));
        assert_eq!(
            first_text(&answer),
            format!("sent {LINES}"),
            "{}",
            answer.raw
        );
        let logged = loom
            .take_pending()
            .iter()
            .filter(|line| line.value["method"] == "notifications/message")
            .count();
        assert_eq!(logged, LINES, "round {round}: log lines before the answer");
    }
}

fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// A client that stops reading while its server floods log lines: loom keeps a bounded queue of
/// notifications for it and drops (and counts) the rest, instead of holding every line (8 M lines
/// grew loom to 2.27 GB). The call's result is never dropped: it arrives once the client reads.
#[test]
fn a_client_that_does_not_read_holds_a_bounded_queue_in_loom() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    const LINES: u64 = 100_000;
    let mut server = fixture_server("fx", &[]);
    server["callTimeoutMs"] = json!(600_000);
    let (_dir, path) = write_config(&json!({ "servers": [server] }));
    let mut loom = Command::new(loom_bin())
        .args(["--config", path.to_str().expect("utf8")])
        .env("LOOM_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loom");
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = loom.stderr.take().expect("stderr");
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().expect("log").push_str(&(line + "\n"));
        }
    });
    let mut stdin = loom.stdin.take().expect("stdin");
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "not-reading", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "fx_logs", "arguments": {"count": LINES, "bytes": 3000}}}),
    ] {
        writeln!(stdin, "{message}").expect("write");
    }
    stdin.flush().expect("flush");
    // Nobody reads loom's stdout until the server has sent every line.
    let sent = format!("sent {LINES} log lines");
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while !log.lock().expect("log").contains(&sent) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not finish: {}",
            log.lock().expect("log")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Let loom take in what it read last.
    std::thread::sleep(Duration::from_secs(2));
    let peak = peak_mib(loom.id());
    eprintln!("loom's peak while its client did not read: {peak} MiB");
    // 100,000 lines of 3 KB are over 300 MB as loom holds them; the queue is 16 MiB.
    assert!(
        peak < 320,
        "loom peaked at {peak} MiB while its client did not read"
    );
    let text = log.lock().expect("log").clone();
    assert!(text.contains("the client is not reading"), "{text}");

    // The client reads again: the result arrives.
    let stdout = loom.stdout.take().expect("stdout");
    let mut answered = false;
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if line.contains(r#""id":2"#) {
            assert!(line.contains(&format!("sent {LINES}")), "{line}");
            answered = true;
            break;
        }
    }
    assert!(answered, "no result for the call");
    drop(stdin);
    let _ = loom.wait();
    let _ = reader.join();
}
