"""The balancer's hop (issue 40): 2026-07-28 `tools/call fx_echo` POSTs to one `loom serve --http`
directly, through README's HAProxy configuration to that same one instance, and through it to
three instances; 1, 10 and 100 closed-loop callers, each on its own keep-alive connection with a
bearer token of its own (README's block balances round-robin: HAProxy spreads the requests over
the three; figures before 2026-12-07 were taken with its earlier `balance hdr(Authorization)`).

    python3 benches/balancer.py [CALLS_PER_CALLER]      (release build: cargo build --release
                                                         --features fixture --bins; Debian's haproxy)

Prints p50/p99 per side and caller count. The client is Python (http.client, a thread per
caller), the same on every side: the differences between sides are what the balancer adds, the
absolute figures include the client's own cost.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOM = Path(os.environ.get("LOOM_BIN", ROOT / "target/release/loom"))
FIXTURE = Path(os.environ.get("LOOM_FIXTURE_BIN", ROOT / "target/release/loom-fixture"))
HAPROXY = os.environ.get("HAPROXY_BIN", "/usr/sbin/haproxy")
TOKENS = [f"bench-token-{i:03}" for i in range(100)]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def start_loom(tmp: Path, n: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    config = tmp / f"loom-{n}.json"
    config.write_text(json.dumps({
        "servers": [{"name": "fx", "command": str(FIXTURE), "args": ["--name", "fx"]}],
        "http": {"tokens": [f"${{BENCH_TOKEN_{i}}}" for i in range(len(TOKENS))], "maxSessions": 1000},
    }))
    env = {**os.environ, "LOOM_LOG": "error", **{f"BENCH_TOKEN_{i}": t for i, t in enumerate(TOKENS)}}
    process = subprocess.Popen([str(LOOM), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_port(port)
    return process, port


def start_haproxy(tmp: Path, backends: list[int]) -> tuple[subprocess.Popen, int]:
    readme = (ROOT / "README.md").read_text()
    config = re.search(r"```text\n(.*?)```", readme.partition("<!-- tested: haproxy -->")[2], re.S)[1]
    port = free_port()
    config = re.sub(r"(?m)^(\s*bind) \S+", rf"\1 127.0.0.1:{port}", config)
    config = re.sub(r"(?m)^\s*server .*\n", "", config)
    config += "".join(f"    server loom{i} 127.0.0.1:{p} check inter 1s fall 2 rise 1\n" for i, p in enumerate(backends))
    path = tmp / f"haproxy-{port}.cfg"
    path.write_text(config)
    process = subprocess.Popen([HAPROXY, "-db", "-f", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    time.sleep(1.5)  # the first health checks
    return process, port


def caller(port: int, token: str, calls: int, out: list[float], start: threading.Barrier) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    headers = {
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token}", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": "fx_echo",
    }
    bodies = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                          "params": {"name": "fx_echo", "arguments": {"text": "ping"}, "_meta": ENVELOPE}})
              for i in range(calls + 20)]
    times = []
    start.wait()
    for i, body in enumerate(bodies):
        began = time.perf_counter_ns()
        connection.request("POST", "/mcp", body, headers)
        answer = connection.getresponse()
        data = answer.read()
        if answer.status != 200 or b'"result"' not in data:
            sys.exit(f"answer {answer.status}: {data[:200]!r}")
        if i >= 20:
            times.append(time.perf_counter_ns() - began)
    out.extend(times)
    connection.close()


def run(port: int, callers: int, calls: int) -> list[float]:
    out: list[float] = []
    start = threading.Barrier(callers)
    threads = [threading.Thread(target=caller, args=(port, TOKENS[i], calls, out, start)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out)


def main() -> None:
    per_caller_total = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        processes = []
        try:
            looms = [start_loom(tmp, n) for n in range(3)]
            processes += [p for p, _ in looms]
            one, one_port = start_haproxy(tmp, [looms[0][1]])
            three, three_port = start_haproxy(tmp, [port for _, port in looms])
            processes += [one, three]
            sides = [("one loom directly", looms[0][1]), ("HAProxy → that loom", one_port), ("HAProxy → 3 looms", three_port)]
            print(f"2026-07-28 tools/call fx_echo over HTTP, µs (Python client, {per_caller_total} calls per caller count and side)")
            for callers in (1, 10, 100):
                calls = max(per_caller_total // callers, 20)
                results = {name: [] for name, _ in sides}
                for _ in range(3):  # interleaved rounds
                    for name, port in sides:
                        results[name] += run(port, callers, calls // 3 + 1)
                direct = statistics.median(results[sides[0][0]]) / 1000  # median sorts itself
                for name, _ in sides:
                    times = sorted(results[name])
                    p50 = statistics.median(times) / 1000
                    p99 = times[int(len(times) * 0.99) - 1] / 1000
                    print(f"  {callers:>3} callers  {name:<22} p50 {p50:8.1f}  p99 {p99:8.1f}  ({p50 - direct:+.1f} p50)")
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait()


if __name__ == "__main__":
    main()
