"""The model summary stage (SPEC §19.9) through the official clients, against a real
OpenAI-compatible server nobody here wrote: LiteLLM's proxy from PyPI (.ci/venv-litellm,
tests/interop/requirements-litellm.txt) serving a mock model offline.

    client --stdio or HTTP--> loom --stdio--> server-filesystem (.ci/node) over a 6,000-line log
                                   --HTTP---> LiteLLM proxy, model "loom-mock" (mock_response)

One LiteLLM proxy serves the whole module (it takes 7-20 s to start; loom starts are cheap). Its
config has four models: `loom-mock` answers MOCK_SUMMARY to anything (with LiteLLM's own
`usage`), `loom-wordy` answers more than the budget, and `loom-relay` passes the request on to our
fixture endpoint (tests/common/llm_endpoint.py), whose answer is made from the text it was sent, so
the log is shown to travel loom → LiteLLM → model and back; `loom-reasoning` passes it on to the
fixture's `reasoning` model, which refuses `max_tokens` as OpenAI's reasoning models do.

- Every client mode (SDK 2.x `auto`, `2026-07-28`, `legacy` and SDK 1.x; over stdio and over
  `loom serve --http`): the log read through loom is the model's summary under the header that
  names the model and the pointer to the original; the original reads back page by page exactly as
  the same client connected to the server directly gets it; loom_stats counts the summary and
  LiteLLM's tokens.
- Errors and denials are never sent (the recording fixture endpoint in front instead of LiteLLM, so
  every request is seen): a missing file, a 30 KB and a 60 KB "Access denied" error of the real
  server, a log that starts with a permission denial — then one log that is sent, to show the
  endpoint was listening.
- The key is in nothing loom wrote or answered: results, its log at debug level, the report file,
  the snapshot, `loom check`.
- A reasoning model behind LiteLLM: its refusal of `max_tokens`, in LiteLLM's words, makes loom
  ask once more with `max_completion_tokens`, and that way from then on; `provider: "openai"`
  asks that way from the start, and LiteLLM takes it.
- A key LiteLLM refuses (it answers 400 "No connected db." for a key that is not its master key),
  and an answer over the budget: the call succeeds with exactly the cut text loom gives without the
  stage, and one warning is logged.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from conftest import FS, LOOM_BIN, PATIENCE, REPO_ROOT, connect, connect_direct, dump, free_port
from dataplane_clients import DataClient, DataSetup, Sdk2Client, assert_ok, sdk1_client, text_of
from test_firewall import BUDGET_CHARS, ERROR_HARD_LIMIT, only_text, read_all
from test_http_serve import connect_http, serve_http

pytestmark = pytest.mark.anyio

LITELLM = REPO_ROOT / ".ci" / "venv-litellm" / "bin" / "litellm"
LLM_ENDPOINT = REPO_ROOT / "tests" / "common" / "llm_endpoint.py"

# What loom sends as its Bearer key (LiteLLM's master key); it must never show anywhere.
KEY = "sk-loom-interop-5e0c7a93b1f2"
KEY_VAR = "LOOM_TEST_LLM_KEY"
# What LiteLLM sends on to the fixture endpoint for the `loom-relay` model (its own key, not loom's).
RELAY_KEY = "relay-key-2d9f41"

MODEL = "loom-mock"
RELAY_MODEL = "loom-relay"
MOCK_SUMMARY = (
    "service.log: 6,000 lines of access log from worker-1 to worker-4 (2026-12-03 08:00-09:40 UTC), "
    "mostly GET /api/items answered 200. Three errors: line 137 ERROR db: query timed out after 30000 ms "
    "(orders_by_customer); line 512 ERROR disk: /var/data is 91% full; line 733 ERROR upstream: "
    "payments.internal answered 502 Bad Gateway."
)
# An answer over the budget (7,000 characters): loom must not use it.
WORDY_MODEL = "loom-wordy"
REASONING_MODEL = "loom-reasoning"
WORDY_SUMMARY = "The service answered GET /api/items with 200. " * 180

# A deterministic service log: 6,000 lines (~450,000 characters, far over maxInputChars 120,000)
# with three ERROR lines among the first 1,000.
LOG_LINES = 6_000
ERRORS = {
    137: "ERROR db: query timed out after 30000 ms (orders_by_customer)",
    512: "ERROR disk: /var/data is 91% full",
    733: "ERROR upstream: payments.internal answered 502 Bad Gateway",
}

TRANSPORTS = ["stdio", "http"]
CLIENT_KINDS = ["sdk2-auto", "sdk2-2026-07-28", "sdk2-legacy", "sdk1"]

SUMMARY_HEADER = re.compile(
    r'^\[loom: text summarised by the model "(?P<model>[^"]+)", (?P<before>[\d,]+) → (?P<after>[\d,]+) chars; '
    r"(?P<middle>.*)a summary can miss details: the whole original is loom_read\(\"(?P<ref>doc_\d+)\"\)\]$"
)


def service_log() -> str:
    lines = []
    for n in range(1, LOG_LINES + 1):
        stamp = f"2026-12-03T{8 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        if n in ERRORS:
            lines.append(f"{stamp} {ERRORS[n]}")
        else:
            lines.append(f"{stamp} INFO  worker-{n % 4 + 1} GET /api/items/{n * 7919 % 100_000} 200 in {n * 37 % 250} ms")
    return "\n".join(lines) + "\n"


LOG = service_log()


def _number(text: str) -> int:
    return int(text.replace(",", ""))


# --------------------------------------------------------------------------------------------
# LiteLLM's proxy and the fixture endpoint


def _post_json(url: str, body: dict[str, Any], key: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=PATIENCE) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


@dataclass
class FixtureEndpoint:
    """tests/common/llm_endpoint.py, recording every request."""

    process: subprocess.Popen
    port: int
    record: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        """Every chat completion request it got, in order (LiteLLM also asks the relay for
        `GET /v1/models` now and then: not counted)."""
        if not self.record.exists():
            return []
        got = [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]
        return [request for request in got if request["method"] == "POST"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_fixture_endpoint(home: Path, key: str) -> FixtureEndpoint:
    record = home / "requests.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(LLM_ENDPOINT), "--record", str(record), "--key", key],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    found = re.fullmatch(r"listening on (\d+)", first)
    if not found:
        process.kill()
        pytest.fail(f"the fixture endpoint said {first!r} instead of where it listens")
    return FixtureEndpoint(process, int(found[1]), record)


@dataclass
class LiteLLMProxy:
    base_url: str
    usage: dict[str, int]
    """The `usage` LiteLLM answered the warm-up request with (its mock model's, the same for any text)."""
    relay: FixtureEndpoint
    """Where the `loom-relay` model sends requests on to."""
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiteLLMProxy]:
    """One LiteLLM proxy for the module, offline, with the models `loom-mock`, `loom-wordy`,
    `loom-relay` and `loom-reasoning` (and the fixture endpoint behind the last two)."""
    if not LITELLM.is_file():
        why = f"{LITELLM.relative_to(REPO_ROOT)} is missing: run .ci/setup-interop (tests/interop/requirements-litellm.txt)"
        pytest.skip(why)  # a failure under CI or LOOM_STRICT_TESTS=1 (conftest.py)
    home = tmp_path_factory.mktemp("litellm")
    relay = start_fixture_endpoint(home, RELAY_KEY)
    # JSON is YAML: LiteLLM reads it with yaml.safe_load.
    config = {
        "model_list": [
            {"model_name": MODEL, "litellm_params": {"model": f"openai/{MODEL}", "api_key": "unused", "mock_response": MOCK_SUMMARY}},
            {"model_name": WORDY_MODEL, "litellm_params": {"model": f"openai/{WORDY_MODEL}", "api_key": "unused", "mock_response": WORDY_SUMMARY}},
            {"model_name": RELAY_MODEL, "litellm_params": {"model": "openai/summary", "api_base": relay.base_url, "api_key": RELAY_KEY}},
            {"model_name": REASONING_MODEL, "litellm_params": {"model": "openai/reasoning", "api_base": relay.base_url, "api_key": RELAY_KEY}},
        ],
        "general_settings": {"master_key": KEY},
    }
    (home / "config.yaml").write_text(json.dumps(config, indent=2))
    port = free_port()
    log = home / "litellm.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(LITELLM), "--config", str(home / "config.yaml"), "--host", "127.0.0.1", "--port", str(port)],
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # The model cost map bundled with the package: no download at start.
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1,localhost"},
        )
    proxy = LiteLLMProxy(f"http://127.0.0.1:{port}/v1", {}, relay, log)
    try:
        deadline = time.monotonic() + 180
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while True:
            if process.poll() is not None:
                pytest.fail(f"LiteLLM exited with {process.returncode} before it served:\n{proxy.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"LiteLLM did not serve within 180 s:\n{proxy.log_tail()}")
            try:
                with opener.open(f"http://127.0.0.1:{port}/health/liveliness", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.25)
        status, answer = _post_json(
            f"{proxy.base_url}/chat/completions",
            {"model": MODEL, "messages": [{"role": "user", "content": "warm-up"}], "max_tokens": 64, "stream": False},
            KEY,
        )
        assert status == 200, f"LiteLLM's warm-up: {status} {answer}\n{proxy.log_tail()}"
        assert answer["choices"][0]["message"]["content"] == MOCK_SUMMARY, answer
        proxy.usage = answer["usage"]
        assert proxy.usage["prompt_tokens"] > 0 and proxy.usage["completion_tokens"] > 0, answer
        yield proxy
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        relay.stop()


# --------------------------------------------------------------------------------------------
# loom, and clients of it


@pytest.fixture
def lm(setup) -> DataSetup:
    """server-filesystem as `fs` over a temp dir holding service.log; loom has the key in its
    environment."""
    (setup.fs_root / "service.log").write_text(LOG)
    return DataSetup(
        tmp=setup.tmp,
        fs_root=setup.fs_root,
        servers=dict(setup.servers),
        enabled=[FS],
        env={KEY_VAR: KEY},
    )


def with_llm(s: DataSetup, base_url: str, model: str = MODEL) -> DataSetup:
    s.options["llm"] = {"baseUrl": base_url, "apiKey": f"${{{KEY_VAR}}}", "model": model, "timeoutMs": 20_000}
    s.options["compression"] = {"default": {"llmSummary": True}}
    return s


@dataclass
class Through:
    """A client connected to loom, and where loom's stderr goes."""

    client: DataClient
    log: Path
    transport: str

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


_stdio_runs = 0


def stdio_params(s: DataSetup, log: Path) -> StdioServerParameters:
    """loom over `s`'s config on stdio, its stderr written to `log`."""
    config = s.write_config()
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", 'exec "$@" 2>"$0"', str(log), str(LOOM_BIN), "--config", str(config)],
        env={"LOOM_LOG": os.environ.get("LOOM_LOG", "info"), **s.env},
    )


@asynccontextmanager
async def through_loom(s: DataSetup, transport: str, kind: str) -> AsyncIterator[Through]:
    """`kind` (one of CLIENT_KINDS) connected to loom over `transport`. When the block ends, loom
    has stopped (its report written)."""
    global _stdio_runs
    if transport == "stdio":
        _stdio_runs += 1
        log = s.tmp / f"loom-stdio-{_stdio_runs}.stderr"
        params = stdio_params(s, log)
        if kind == "sdk1":
            async with sdk1_client({"command": params.command, "args": params.args, "env": params.env}) as client:
                yield Through(client, log, transport)
        else:
            mode = kind.removeprefix("sdk2-")
            async with connect(params, mode=mode) as client:
                yield Through(Sdk2Client(client, mode), log, transport)
        return
    with serve_http(s) as loom:
        if kind == "sdk1":
            async with sdk1_client({"url": loom.url}) as client:
                yield Through(client, loom.log, transport)
        else:
            mode = kind.removeprefix("sdk2-")
            async with connect_http(loom.url, mode) as client:
                yield Through(Sdk2Client(client, mode), loom.log, transport)


def direct_mode(kind: str) -> str:
    """The SDK 2.x mode for the direct connection that a client kind is compared with
    (server-filesystem speaks no 2026-07-28: `auto` falls back to the handshake; the 1.x SDK
    speaks the handshake)."""
    return "legacy" if kind in ("sdk2-legacy", "sdk1") else "auto"


async def read_directly(s: DataSetup, kind: str, path: str) -> dict[str, Any]:
    async with connect_direct(s, FS, mode=direct_mode(kind)) as direct:
        return dump(await direct.call_tool("read_text_file", {"path": path}))


async def stats(client: DataClient) -> dict[str, Any]:
    return assert_ok(await client.call("loom_stats", {}), "loom_stats")


def summary_header(shown: str) -> re.Match[str]:
    header = shown.partition("\n")[0]
    found = SUMMARY_HEADER.match(header)
    assert found, f"not a model summary's header: {header[:400]}"
    return found


def failures(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "model summary failed" in line]


# --------------------------------------------------------------------------------------------
# a. The log summarised, its original read back whole, in every client mode


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_a_long_log_is_summarised_and_its_original_reads_back_whole(lm, litellm, transport, kind):
    path = str(lm.fs_root / "service.log")
    own = await read_directly(lm, kind, path)
    assert not own.get("isError") and own["content"] == [{"type": "text", "text": LOG}], str(own)[:500]
    assert own["structuredContent"] == {"content": LOG}

    with_llm(lm, litellm.base_url)
    async with through_loom(lm, transport, kind) as loom:
        client = loom.client
        result = await client.call(f"{FS}_read_text_file", {"path": path})
        shown = only_text(result, "service.log through loom")
        header, _, body = shown.partition("\n")
        found = summary_header(shown)
        assert found["model"] == MODEL, header
        assert _number(found["before"]) == len(LOG), header
        # The model's answer, as LiteLLM gave it, in the cut text's place.
        assert body == MOCK_SUMMARY, body[:500]
        assert _number(found["after"]) == len(body), header
        assert len(body) <= BUDGET_CHARS and len(header) < 400, (len(header), len(body))
        # Over maxInputChars (120,000): the header says how much of it the model read.
        read_of = re.search(r"the model read ([\d,]+) of its ([\d,]+) chars", found["middle"])
        assert read_of, header
        assert 100_000 <= _number(read_of[1]) <= 120_000 and _number(read_of[2]) == len(LOG), header
        # server-filesystem's structuredContent copy goes with its text block (SPEC §19.1).
        assert result.get("structuredContent") == {"content": shown}, str(result.get("structuredContent"))[:300]

        # The whole original, page by page through the same client: what the server sent.
        assert await read_all(client, found["ref"]) == own["content"][0]["text"]

        live = await stats(client)
        assert live["modelSummaries"] == {
            "summarized": 1,
            "fellBack": 0,
            "promptTokens": litellm.usage["prompt_tokens"],
            "completionTokens": litellm.usage["completion_tokens"],
        }, live["modelSummaries"]
        assert live["modelSummaries"]["promptTokens"] > 0
        assert live["calls"]["documents"] == 1, live["calls"]
    stderr = loom.stderr()
    assert not failures(stderr), failures(stderr)
    assert KEY not in stderr


async def test_the_text_reaches_the_model_through_litellm(lm, litellm):
    """`loom-relay`: LiteLLM passes loom's request on to the fixture endpoint, whose summary is
    made from the text it got — the head and tail loom sent (maxInputChars), with the three
    errors that the 7,000-character cut would have left out."""
    before = len(litellm.relay.requests())
    with_llm(lm, litellm.base_url, RELAY_MODEL)
    async with through_loom(lm, "stdio", "sdk2-auto") as loom:
        shown = only_text(await loom.client.call(f"{FS}_read_text_file", {"path": str(lm.fs_root / "service.log")}), "relayed")
        found = summary_header(shown)
        assert found["model"] == RELAY_MODEL
        body = shown.partition("\n")[2]
        lines = LOG.splitlines()
        assert body.startswith("Summary (fixture): "), body
        assert f"First line: {lines[0]}." in body and f"Last line: {lines[-1]}." in body, body
        # The three errors, all in the head loom sent (the 7,000-character cut keeps ~70 lines).
        errors = [line for line in lines if "ERROR" in line]
        assert len(errors) == 3 and f"Errors: {' | '.join(errors)}." in body, body
        assert (await stats(loom.client))["modelSummaries"]["summarized"] == 1

    sent = litellm.relay.requests()[before:]
    assert len(sent) == 1, sent
    # LiteLLM's own key went on to the model, not loom's.
    assert sent[0]["authorization"] == f"Bearer {RELAY_KEY}"
    messages = sent[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"], messages
    # Over maxInputChars (120,000): the log's head and tail, whole lines, around a marker that
    # names exactly what was left out (SPEC §19.9).
    text = messages[1]["content"]
    assert len(text) <= 120_000, len(text)
    marker = re.search(r"\[… ([\d,]+) characters \(lines (\d+)–(\d+)\) left out here …\]\n", text)
    assert marker, text[:300]
    head, tail = text[: marker.start()], text[marker.end() :]
    assert LOG.startswith(head) and LOG.endswith(tail) and head.endswith("\n"), (head[-100:], tail[:100])
    assert len(head) + _number(marker[1]) + len(tail) == len(LOG), marker[0]
    assert (int(marker[2]), int(marker[3])) == (head.count("\n") + 1, LOG_LINES - tail.count("\n")), marker[0]
    assert len(head) > 2 * len(tail), "about three quarters head"
    assert "read_text_file" not in json.dumps(messages) and str(lm.fs_root) not in json.dumps(messages), "no tool or argument goes out"


def _limits(requests: list[dict[str, Any]]) -> list[list[str]]:
    return [[member for member in request["body"] if member.startswith("max_")] for request in requests]


async def test_a_reasoning_model_behind_litellm_is_asked_with_max_completion_tokens(lm, litellm):
    """The fixture's `reasoning` model refuses `max_tokens` with OpenAI's error; LiteLLM hands
    the refusal back in its own words, loom asks once more with `max_completion_tokens` (room to
    reason included) and asks that way from then on. With `provider: "openai"` loom starts with
    it, and LiteLLM takes it (SPEC §19.9)."""
    path = str(lm.fs_root / "service.log")
    before = len(litellm.relay.requests())
    with_llm(lm, litellm.base_url, REASONING_MODEL)
    async with through_loom(lm, "stdio", "sdk2-auto") as loom:
        for call in (1, 2):
            shown = only_text(await loom.client.call(f"{FS}_read_text_file", {"path": path}), f"reasoning, call {call}")
            assert "text summarised by the model" in shown.partition("\n")[0], (shown[:200], [{k: v for k, v in r["body"].items() if k != "messages"} for r in litellm.relay.requests()[before:]])
            assert summary_header(shown)["model"] == REASONING_MODEL, shown[:300]
            assert shown.partition("\n")[2].startswith("Summary (fixture): "), shown[:300]
        figures = (await stats(loom.client))["modelSummaries"]
    assert figures["summarized"] == 2 and figures["fellBack"] == 0, figures
    assert figures["completionTokens"] > 2 * 3000, "the reasoning tokens LiteLLM passed on are counted"
    assert _limits(litellm.relay.requests()[before:]) == [["max_tokens"], ["max_completion_tokens"], ["max_completion_tokens"]]
    stderr = loom.stderr()
    assert stderr.count("the model endpoint refuses `max_tokens`") == 1, stderr[-2000:]
    assert not failures(stderr), failures(stderr)

    before = len(litellm.relay.requests())
    with_llm(lm, litellm.base_url, REASONING_MODEL)
    lm.options["llm"]["provider"] = "openai"
    async with through_loom(lm, "stdio", "sdk2-legacy") as loom:
        shown = only_text(await loom.client.call(f"{FS}_read_text_file", {"path": path}), "provider openai")
        assert summary_header(shown)["model"] == REASONING_MODEL, shown[:300]
    assert _limits(litellm.relay.requests()[before:]) == [["max_completion_tokens"]]
    assert "refuses" not in loom.stderr() and not failures(loom.stderr())


# --------------------------------------------------------------------------------------------
# b. Errors and denials are never sent


@pytest.fixture
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FixtureEndpoint]:
    endpoint = start_fixture_endpoint(tmp_path_factory.mktemp("endpoint"), KEY)
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.mark.parametrize(("transport", "kind"), [("stdio", "sdk2-legacy"), ("http", "sdk2-auto"), ("stdio", "sdk1"), ("http", "sdk2-2026-07-28")])
async def test_errors_and_denials_are_never_sent(lm, recording, transport, kind):
    denial = "Error: EACCES: permission denied, open '/srv/app/secrets.yaml'\n" + "".join(LOG.splitlines(keepends=True)[:400])
    assert len(denial) > 4 * BUDGET_CHARS
    (lm.fs_root / "denied.log").write_text(denial)
    missing = str(lm.fs_root / "missing.log")
    # server-filesystem quotes the refused path: "Access denied - path outside allowed directories: …".
    outside = "/etc/" + "a" * 30_000
    far_outside = "/etc/" + "b" * 60_000

    own = {}
    async with connect_direct(lm, FS, mode=direct_mode(kind)) as direct:
        for path in (missing, outside, far_outside, str(lm.fs_root / "denied.log")):
            own[path] = dump(await direct.call_tool("read_text_file", {"path": path}))
    assert own[missing]["isError"] and "ENOENT" in text_of(own[missing])
    assert own[outside]["isError"] and text_of(own[outside]).startswith("Access denied") and len(text_of(own[outside])) > 30_000
    assert len(text_of(own[far_outside])) > ERROR_HARD_LIMIT
    assert text_of(own[str(lm.fs_root / "denied.log")]) == denial

    with_llm(lm, recording.base_url, "summary")
    async with through_loom(lm, transport, kind) as loom:
        client = loom.client
        for path in (missing, outside, str(lm.fs_root / "denied.log")):
            via = await client.call(f"{FS}_read_text_file", {"path": path})
            # Whole, as the server sent it (SPEC §19.2).
            assert via["content"] == own[path]["content"], (path[:80], text_of(via)[:300])
            assert via.get("isError") == own[path].get("isError"), path[:80]

        # Over 50,000 characters: cut at the hard limit, still an error, still not sent.
        cut = await client.call(f"{FS}_read_text_file", {"path": far_outside})
        assert cut.get("isError") is True
        whole = text_of(own[far_outside])
        header = text_of(cut).partition("\n")[0]
        assert header.startswith(f"[loom: security-relevant output cut at the hard limit, {len(whole):,} → 50,000 chars"), header
        ref = re.search(r'loom_read\("(doc_\d+)"\)', header)
        assert ref, header
        assert await read_all(client, ref[1]) == whole

        assert recording.requests() == [], "an error or denial went to the model"
        live = await stats(client)
        assert live["modelSummaries"] == {"summarized": 0, "fellBack": 0, "promptTokens": 0, "completionTokens": 0}, live

        # The control: the endpoint was listening all along, and the log does go to it.
        shown = only_text(await client.call(f"{FS}_read_text_file", {"path": str(lm.fs_root / "service.log")}), "service.log")
        assert summary_header(shown)["model"] == "summary"
        assert shown.partition("\n")[2].startswith("Summary (fixture): ")
        assert (await stats(client))["modelSummaries"]["summarized"] == 1
    sent = recording.requests()
    assert len(sent) == 1, [request["body"].get("model") for request in sent]
    assert sent[0]["authorization"] == f"Bearer {KEY}" and sent[0]["path"] == "/v1/chat/completions"
    assert "Access denied" not in json.dumps(sent) and "EACCES" not in json.dumps(sent) and "ENOENT" not in json.dumps(sent)
    assert not failures(loom.stderr()), failures(loom.stderr())


# --------------------------------------------------------------------------------------------
# c. The key is in nothing loom wrote or answered


def _files_with(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


@pytest.mark.parametrize(("transport", "kind"), [("stdio", "sdk2-auto"), ("http", "sdk2-legacy"), ("stdio", "sdk1")])
async def test_the_key_appears_nowhere(lm, litellm, transport, kind):
    with_llm(lm, litellm.base_url)
    report = lm.tmp / "report.json"
    snapshots = lm.tmp / "snaps"
    lm.options["report"] = {"enabled": True, "path": str(report)}
    lm.options["snapshot"] = {"url": str(snapshots)}
    lm.env["LOOM_LOG"] = "debug"

    # loom check: the endpoint, the key masked.
    checked = subprocess.run(
        [str(LOOM_BIN), "check", "--config", str(lm.write_config())],
        capture_output=True, text=True, timeout=PATIENCE, env={**os.environ, **lm.env},
    )
    assert checked.returncode == 0, checked.stderr
    assert f"POST {litellm.base_url}/chat/completions" in checked.stdout and f"key *** (from {KEY_VAR})" in checked.stdout, checked.stdout
    assert KEY not in checked.stdout + checked.stderr

    answers: list[Any] = []
    async with through_loom(lm, transport, kind) as loom:
        client = loom.client
        answers.append(await client.list_tools())
        result = await client.call(f"{FS}_read_text_file", {"path": str(lm.fs_root / "service.log")})
        answers.append(result)
        ref = summary_header(only_text(result, "service.log"))["ref"]
        for arguments in ({"ref": ref}, {"ref": ref, "pattern": "ERROR"}, {"ref": ref, "lines": "1-3"}):
            answers.append(await client.call("loom_read", arguments))
        for tool, arguments in (("loom_list_datasets", {}), ("loom_describe", {"ref": ref}), ("loom_stats", {})):
            answers.append(await client.call(tool, arguments))
        assert answers[-1]["structuredContent"]["modelSummaries"]["summarized"] == 1
    for answer in answers:
        assert KEY not in json.dumps(answer, ensure_ascii=False), str(answer)[:300]

    stderr = loom.stderr()
    assert " DEBUG " in stderr, "loom logged at debug level"
    assert KEY not in stderr
    # The report at shutdown counts the summary: on stderr, and in report.path (written by the
    # stdio session only, SPEC §22).
    assert "model summaries: 1 text(s) summarised, 0 got the cut text instead" in stderr, stderr[-3000:]
    if transport == "stdio":
        written = json.loads(report.read_text())
        assert written["modelSummaries"]["summarized"] == 1, written["modelSummaries"]
    else:
        assert not report.exists()
    # The snapshot holds the document (the original log), so it is worth searching.
    manifests = list(snapshots.rglob("manifest.json"))
    assert len(manifests) == 1, manifests
    held = json.loads(manifests[0].read_text())["datasets"]
    assert [(d["ref"], d["kind"]) for d in held] == [(ref, "document")], held
    assert list(snapshots.rglob("*.parquet")), "no Parquet file written"
    # Every file under the test's directory: config, loom's log, report, snapshot, the server's files.
    assert _files_with(lm.tmp, KEY.encode()) == []
    assert lm.config_path.read_text().count(f"${{{KEY_VAR}}}") == 1, "the config names the variable, not the key"


# --------------------------------------------------------------------------------------------
# d. A key LiteLLM refuses


@pytest.mark.parametrize(("transport", "kind"), [("stdio", "sdk2-auto"), ("http", "sdk2-2026-07-28"), ("stdio", "sdk1")])
async def test_a_refused_key_answers_the_cut_text(lm, litellm, transport, kind):
    path = str(lm.fs_root / "service.log")
    async with through_loom(lm, transport, kind) as plain:
        reference = await plain.client.call(f"{FS}_read_text_file", {"path": path})
    cut = only_text(reference, "without the stage")
    assert cut.startswith(f"[loom: text reduced {len(LOG):,} → "), cut[:300]

    wrong = "sk-not-the-master-key-77a0"
    with_llm(lm, litellm.base_url)
    lm.env[KEY_VAR] = wrong
    async with through_loom(lm, transport, kind) as loom:
        result = await loom.client.call(f"{FS}_read_text_file", {"path": path})
        shown = only_text(result, "with a refused key")
        # The same answer as without the stage (each session's first document is doc_1).
        assert shown == cut and 'loom_read("doc_1")' in shown
        assert result.get("structuredContent") == reference.get("structuredContent") == {"content": cut}
        figures = (await stats(loom.client))["modelSummaries"]
        assert (figures["summarized"], figures["fellBack"]) == (0, 1), figures
    # The fallback came from LiteLLM's refusal, not from waiting out timeoutMs (20 s): the warning
    # names the status (a timeout's says "(timeout)").
    warned = failures(loom.stderr())
    assert len(warned) == 1 and " WARN " in warned[0] and "(error status): HTTP 4" in warned[0], warned
    assert wrong not in loom.stderr() and KEY not in loom.stderr()


async def test_an_answer_over_the_budget_answers_the_cut_text(lm, litellm):
    """`loom-wordy` answers 8,280 characters: over the budget, so the cut text answers, with one
    warning; the tokens LiteLLM reports are counted anyway (spent whether or not the summary was
    used, SPEC §19.9)."""
    assert len(WORDY_SUMMARY) > BUDGET_CHARS
    path = str(lm.fs_root / "service.log")
    async with through_loom(lm, "stdio", "sdk2-legacy") as plain:
        cut = only_text(await plain.client.call(f"{FS}_read_text_file", {"path": path}), "without the stage")
    with_llm(lm, litellm.base_url, WORDY_MODEL)
    async with through_loom(lm, "stdio", "sdk2-legacy") as loom:
        for call in (1, 2):
            shown = only_text(await loom.client.call(f"{FS}_read_text_file", {"path": path}), f"wordy, call {call}")
            assert shown == cut.replace("doc_1", f"doc_{call}"), shown[:300]
        figures = (await stats(loom.client))["modelSummaries"]
    assert figures == {
        "summarized": 0,
        "fellBack": 2,
        "promptTokens": 2 * litellm.usage["prompt_tokens"],
        "completionTokens": 2 * litellm.usage["completion_tokens"],
    }, figures
    warned = failures(loom.stderr())
    assert len(warned) == 1 and " WARN " in warned[0] and "(summary over budget)" in warned[0], warned


# --------------------------------------------------------------------------------------------
# e. The MCP Inspector CLI, in each of its protocol eras


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
def test_the_inspector_gets_the_summary(litellm, lm, era):
    """The Inspector validates every result it is sent; it starts loom with a minimal environment
    of its own, so here the key is written into the config (loom accepts it with a warning)."""
    from test_dataplane_inspector import INSPECTOR_CLI, NODE22, Inspector

    for path in (NODE22, INSPECTOR_CLI):
        if not path.is_file():
            pytest.fail(f"{path} is missing: run .ci/setup-interop")
    with_llm(lm, litellm.base_url)
    lm.options["llm"]["apiKey"] = KEY
    inspector = Inspector(lm, era)
    result = inspector.call(f"{FS}_read_text_file", {"path": str(lm.fs_root / "service.log")})
    shown = only_text(result, f"service.log through loom ({era})")
    found = summary_header(shown)
    assert found["model"] == MODEL and _number(found["before"]) == len(LOG), shown[:400]
    assert shown.partition("\n")[2] == MOCK_SUMMARY
    assert result.get("structuredContent") == {"content": shown}
    assert KEY not in json.dumps(result)
