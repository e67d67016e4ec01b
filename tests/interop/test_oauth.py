"""loom as an OAuth 2.1 client of a remote MCP server (SPEC §4.7), against a real authorization
server (npm `oidc-provider`, tests/interop/oauth/as.mjs) and a protected server built on the
official Python SDK's resource-server support (tests/interop/oauth/protected_server.py), with
tests/interop/oauth/browser.py standing in for the person's browser (`$BROWSER`).

A person logs in with `loom auth login`; then the official clients (SDK 2.x auto and legacy, SDK
1.x) use the server through loom: a call as the test user, a large result → envelope → query, a
call after the access token expired (refreshed, no second login), logout. The same calls made by
the SDK connected directly, with its own OAuth client, give the same answers. A server that
needs a login does not stop loom; bad input (a refused authorization, a forged state, another
issuer, no way to register, a revoked refresh token, a login file others can read) gets a clear
error and loom stays up.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from conftest import LOOM_BIN, PATIENCE, REPO_ROOT, Setup
from dataplane_clients import assert_envelope, assert_ok, open_client, text_of

pytestmark = pytest.mark.anyio

RIG = Path(__file__).resolve().parent / "oauth"
sys.path.insert(0, str(RIG))
from rig import Callback, MemoryStorage, started  # noqa: E402 — the rig's shared parts
BROWSER = RIG / "browser.py"
SERVER = "lin"
CLIENT_KINDS = ["sdk2-auto", "sdk2-legacy", "sdk1"]
# Short enough that a test waits it out, long enough that a call made right after a login or a
# refresh never meets an expired token.
ACCESS_TTL = 4


@dataclass
class Rig:
    as_url: str
    mcp_url: str
    tmp: Path

    @property
    def state_home(self) -> Path:
        return self.tmp / "state"

    def stats(self, url: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{url}/test/stats", timeout=PATIENCE) as answer:
            return json.loads(answer.read())

    def as_stats(self) -> dict[str, Any]:
        return self.stats(self.as_url)

    def server_stats(self) -> dict[str, Any]:
        return self.stats(self.mcp_url.removesuffix("/mcp"))

    def revoke(self) -> None:
        request = urllib.request.Request(f"{self.as_url}/test/revoke", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=PATIENCE).read()

    def env(self, browser_mode: str = "approve") -> dict[str, str]:
        return {
            "XDG_STATE_HOME": str(self.state_home),
            "BROWSER": str(BROWSER),
            "LOOM_TEST_BROWSER_MODE": browser_mode,
            "LOOM_TEST_BROWSER_LOG": str(self.tmp / "browser.jsonl"),
        }

    def browser_runs(self) -> int:
        log = self.tmp / "browser.jsonl"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def setup(self, entry: dict[str, Any] | None = None) -> Setup:
        servers = {SERVER: {"url": self.mcp_url, **(entry or {})}}
        setup = Setup(tmp=self.tmp, fs_root=self.tmp, servers=servers, enabled=[SERVER])
        setup.env = {**self.env(), "PATH": os.environ.get("PATH", "")}
        return setup

    def auth(self, setup: Setup, *args: str, browser_mode: str = "approve", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        setup.write_config()
        return subprocess.run(
            [str(LOOM_BIN), "auth", *args, "--config", str(setup.config_path)],
            env={**os.environ, **self.env(browser_mode), "LOOM_LOG": "warn", **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def login_files(self) -> list[Path]:
        folder = self.state_home / "loom" / "oauth"
        return sorted(p for p in folder.glob("*.json")) if folder.exists() else []


@contextmanager
def rig_on(tmp: Path, server_scopes: str = "mcp:read", **as_env: str) -> Iterator[Rig]:
    env = {"AS_ACCESS_TTL": str(ACCESS_TTL), **as_env}
    with started(["node", str(RIG / "as.mjs"), "0"], "AS_URL=", tmp / "as.log", env) as as_url:
        server = [sys.executable, str(RIG / "protected_server.py"), "--as", as_url, "--port", "0", "--scopes", server_scopes]
        with started(server, "MCP_URL=", tmp / "server.log", {}) as mcp_url:
            yield Rig(as_url=as_url, mcp_url=mcp_url, tmp=tmp)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with rig_on(tmp_path) as rig:
        yield rig


@asynccontextmanager
async def direct(rig: Rig) -> AsyncIterator[Client]:
    """The official SDK connected straight to the protected server, logged in with its own OAuth
    client (browser.py plays the person; a loopback listener takes the code)."""
    callback = Callback()
    redirect = callback.uri

    async def open_browser(url: str) -> None:
        subprocess.Popen([str(BROWSER), url], env={**os.environ, "LOOM_TEST_BROWSER_MODE": "approve"})

    async def code() -> AuthorizationCodeResult:
        with anyio.fail_after(PATIENCE):
            while not callback.received:
                await anyio.sleep(0.05)
        got = callback.received.pop(0)
        return AuthorizationCodeResult(code=got["code"], state=got.get("state"), iss=got.get("iss"))

    provider = OAuthClientProvider(
        server_url=rig.mcp_url,
        client_metadata=OAuthClientMetadata(client_name="direct", redirect_uris=[redirect], token_endpoint_auth_method="none"),
        storage=MemoryStorage(),
        redirect_handler=open_browser,
        callback_handler=code,
    )
    try:
        async with httpx2.AsyncClient(auth=provider, timeout=PATIENCE) as http:
            async with Client(streamable_http_client(rig.mcp_url, http_client=http), read_timeout_seconds=PATIENCE) as client:
                yield client
    finally:
        callback.close()


def whoami_fields(text: str) -> dict[str, str]:
    """`sub=… client_id=… scopes=…` as a dict (client ids differ between loom and the SDK)."""
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    fields.pop("client_id", None)
    return fields


@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_login_then_calls_refresh_and_logout_through_loom_match_direct(rig: Rig, kind: str) -> None:
    setup = rig.setup()
    status = rig.auth(setup, "status")
    assert status.returncode == 0, status.stderr
    assert f"{SERVER}\t{rig.mcp_url}\tneeds login" in status.stdout, status.stdout

    # At the most verbose log level too, no credential reaches the log (rmcp's OAuth client
    # writes the authorization code at debug level; loom keeps it at info).
    login = rig.auth(setup, "login", SERVER, env={"LOOM_LOG": "trace"})
    assert login.returncode == 0, login.stderr
    assert f"logged in to `{SERVER}` at {rig.as_url}" in login.stderr, login.stderr
    assert "mcp:read" in login.stderr
    assert rig.browser_runs() == 1
    visited = json.loads((rig.tmp / "browser.jsonl").read_text().splitlines()[0])
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(visited["callback"]).query))["code"]
    assert code not in login.stderr, "the authorization code is in loom's log"
    files = rig.login_files()
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    stored = json.loads(files[0].read_text())
    access = stored["credentials"]["token_response"]["access_token"]
    assert access not in login.stderr + login.stdout
    status = rig.auth(setup, "status")
    assert "\tauthorized, expires in " in status.stdout and "scopes mcp:read" in status.stdout, status.stdout
    assert access not in status.stdout + status.stderr

    async with direct(rig) as own:
        own_whoami = (await own.call_tool("whoami", {})).content[0].text
        own_rows = json.loads((await own.call_tool("big_table", {})).content[0].text)

    async with open_client(kind, setup) as client:
        names = {tool["name"] for tool in await client.list_tools()}
        assert {f"{SERVER}_whoami", f"{SERVER}_big_table"} <= names
        whoami = text_of(await client.call(f"{SERVER}_whoami"))
        assert whoami_fields(whoami) == whoami_fields(own_whoami), (whoami, own_whoami)
        assert whoami.startswith("sub=test-user ")

        envelope = assert_envelope(await client.call(f"{SERVER}_big_table"), "big_table")
        assert envelope["rows"] == len(own_rows) == 5000
        answer = assert_ok(
            await client.call("loom_query", {"sql": f"SELECT COUNT(*) AS n, SUM(quantity) AS q FROM {envelope['ref']}"}),
            "loom_query",
        )
        assert answer["rows"] == [{"n": 5000, "q": sum(row["quantity"] for row in own_rows)}]

        # The access token expires; the next call is refreshed, not logged in again.
        before = rig.as_stats()["tokens"]
        await anyio.sleep(ACCESS_TTL + 1.5)
        again = text_of(await client.call(f"{SERVER}_whoami"))
        assert whoami_fields(again) == whoami_fields(own_whoami), again
        after = rig.as_stats()["tokens"]
        assert after.get("refresh_token", 0) > before.get("refresh_token", 0), (before, after)
        assert after.get("authorization_code", 0) == before.get("authorization_code", 0)
        assert rig.browser_runs() == 1  # the login's only: loom opened no browser while serving

    logout = rig.auth(setup, "logout", SERVER)
    assert logout.returncode == 0 and f"logged out of `{SERVER}`" in logout.stderr, logout.stderr
    assert rig.login_files() == []
    assert "\tneeds login" in rig.auth(setup, "status").stdout
    again = rig.auth(setup, "logout", SERVER)
    assert again.returncode == 0 and "not logged in" in again.stderr


async def test_a_server_that_needs_a_login_does_not_stop_loom_and_joins_after_the_login(rig: Rig) -> None:
    setup = rig.setup()
    async with open_client("sdk2-auto", setup) as client:
        names = {tool["name"] for tool in await client.list_tools()}
        # Its tools are not listed; loom's `lin_login` is, which says how to log in.
        assert {name for name in names if name.startswith(f"{SERVER}_")} == {f"{SERVER}_login"}, names
        assert "loom_query" in names
        refused = await client.call(f"{SERVER}_whoami")
        assert refused.get("isError") is True
        assert f"`loom auth login {SERVER}`" in text_of(refused), refused
        how = await client.call(f"{SERVER}_login")
        assert how.get("isError") is True and f"`loom auth login {SERVER}`" in text_of(how), how

        # A person logs in from another terminal while loom serves: the tools come back.
        login = await anyio.to_thread.run_sync(lambda: rig.auth(setup, "login", SERVER))
        assert login.returncode == 0, login.stderr
        with anyio.fail_after(PATIENCE):
            while True:
                names = {tool["name"] for tool in await client.list_tools()}
                if f"{SERVER}_whoami" in names:
                    break
                await anyio.sleep(0.2)
        assert text_of(await client.call(f"{SERVER}_whoami")).startswith("sub=test-user ")

        # The grant is revoked at the authorization server: once the access token expires, the
        # refresh is refused and the server needs a login again; loom says so and stays up.
        rig.revoke()
        await anyio.sleep(ACCESS_TTL + 1.5)
        gone = await client.call(f"{SERVER}_whoami")
        assert gone.get("isError") is True, gone
        with anyio.fail_after(PATIENCE):
            while True:
                names = {tool["name"] for tool in await client.list_tools()}
                if f"{SERVER}_whoami" not in names:
                    break
                await anyio.sleep(0.2)
        refused = await client.call(f"{SERVER}_whoami")
        assert f"`loom auth login {SERVER}`" in text_of(refused), refused
        assert_ok(await client.call("loom_query", {"sql": "SELECT 1 AS one"}), "loom_query")
    # The refused refresh dropped the tokens: the status says so without a guess.
    assert "\tneeds login" in rig.auth(setup, "status").stdout


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("deny", "did not authorize loom: access_denied"),
        ("tamper-state", "`state` is not the one this login sent"),
        ("wrong-iss", "RFC 9207"),
    ],
)
def test_a_refused_or_forged_redirect_keeps_nothing(rig: Rig, mode: str, words: str) -> None:
    setup = rig.setup()
    login = rig.auth(setup, "login", SERVER, browser_mode=mode)
    assert login.returncode == 1, login.stderr
    assert words in login.stderr, login.stderr
    assert rig.login_files() == []
    assert "\tneeds login" in rig.auth(setup, "status").stdout


def test_a_registered_client_and_an_authorization_server_without_registration(tmp_path: Path) -> None:
    with rig_on(tmp_path, AS_NO_REGISTRATION="1", AS_STATIC_CLIENT_ID="loom-static", AS_STATIC_CLIENT_SECRET="s3cret-static") as rig:
        # No dynamic registration and no clientId: the error says what to configure.
        setup = rig.setup()
        login = rig.auth(setup, "login", SERVER)
        assert login.returncode == 1
        assert "neither dynamic client registration nor client metadata documents" in login.stderr, login.stderr
        assert "`oauth.clientId`" in login.stderr

        # The registered confidential client (client_secret_basic) logs in; its secret comes
        # from the environment and shows nowhere.
        setup = rig.setup({"oauth": {"clientId": "loom-static", "clientSecret": "${STATIC_SECRET}", "scopes": ["mcp:read"]}})
        secret = {"STATIC_SECRET": "s3cret-static"}
        login = rig.auth(setup, "login", SERVER, env=secret)
        check = subprocess.run(
            [str(LOOM_BIN), "check", "--config", str(setup.config_path)], capture_output=True, text=True, env={**os.environ, **secret}
        )
        assert login.returncode == 0, login.stderr
        assert "s3cret-static" not in login.stderr + check.stdout + check.stderr
        assert "client loom-static, secret ***, scopes mcp:read" in check.stdout, check.stdout
        stored = json.loads(rig.login_files()[0].read_text())
        assert stored["credentials"]["client_id"] == "loom-static"


def test_a_login_file_others_can_read_is_refused_with_the_fix(rig: Rig) -> None:
    setup = rig.setup()
    assert rig.auth(setup, "login", SERVER).returncode == 0
    [path] = rig.login_files()
    path.chmod(0o644)
    status = rig.auth(setup, "status")
    assert status.returncode == 0
    assert "unusable login" in status.stdout and "chmod 600" in status.stdout, status.stdout
    path.write_text("{not json")
    path.chmod(0o600)
    assert "not a login file loom can read" in rig.auth(setup, "status").stdout


def test_bad_auth_commands_say_what_is_wrong(rig: Rig, tmp_path: Path) -> None:
    setup = rig.setup({"oauth": False})
    setup.servers["local"] = {"command": sys.executable, "args": ["-c", "pass"]}
    setup.enabled = [SERVER, "local"]
    for args, words in [
        (("login", "nope"), "no server `nope` in the configuration; remote servers: lin"),
        (("login", "local"), "only remote servers (`url`) take a login"),
        (("login", SERVER), "\"oauth\": false"),
    ]:
        done = rig.auth(setup, *args)
        assert done.returncode == 2, done.stderr
        assert words in done.stderr, done.stderr
    assert "oauth off" in rig.auth(setup, "status").stdout



async def test_a_server_that_wants_more_scopes_is_logged_in_to_again_with_the_union(tmp_path: Path) -> None:
    with rig_on(tmp_path, server_scopes="mcp:read mcp:write") as rig:
        setup = rig.setup({"oauth": {"scopes": ["mcp:read"]}})
        login = rig.auth(setup, "login", SERVER)
        assert login.returncode == 0 and "scopes mcp:read" in login.stderr, login.stderr
        async with open_client("sdk2-auto", setup) as client:
            # The server answers 403 insufficient_scope: loom says which scopes, and stays up.
            refused = await client.call(f"{SERVER}_whoami")
            assert refused.get("isError") is True, refused
            assert "needs a login with more scopes (mcp:write)" in text_of(refused), refused
            assert f"`loom auth login {SERVER}`" in text_of(refused)
            # The next login asks for the union of the grant and what the server wants.
            again = await anyio.to_thread.run_sync(lambda: rig.auth(setup, "login", SERVER))
            assert again.returncode == 0, again.stderr
            assert "scopes mcp:read mcp:write" in again.stderr, again.stderr
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_whoami" not in {tool["name"] for tool in await client.list_tools()}:
                    await anyio.sleep(0.2)
            whoami = text_of(await client.call(f"{SERVER}_whoami"))
            assert "mcp:write" in whoami and "mcp:read" in whoami, whoami



async def test_a_client_that_takes_url_elicitation_is_asked_to_log_in(rig: Rig) -> None:
    """A call to a tool of the server that waits for a login, from a client that declared
    URL-mode elicitation (the SDK does when given a callback; the handshake era): the person is
    asked to open the authorization page, loom takes the redirect itself, and the tools return."""
    import mcp_types as types

    from conftest import connect_loom

    setup = rig.setup()
    asked: list[dict[str, Any]] = []

    async def person(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.model_dump(by_alias=True, exclude_none=True))
        # The person opens the page (browser.py plays them) and says so.
        subprocess.Popen([str(BROWSER), params.url], env={**os.environ, **rig.env()})
        return types.ElicitResult(action="accept")

    async with connect_loom(setup, "legacy", elicitation_callback=person) as client:
        first = await client.call_tool(f"{SERVER}_whoami", {})
        assert first.is_error, first
        assert f"logged in to `{SERVER}`" in first.content[0].text, first
        assert len(asked) == 1 and asked[0]["mode"] == "url", asked
        assert asked[0]["url"].startswith(f"{rig.as_url}/auth?") and asked[0]["elicitationId"]
        assert SERVER in asked[0]["message"]
        with anyio.fail_after(PATIENCE):
            while f"{SERVER}_whoami" not in {tool.name for tool in (await client.list_tools()).tools}:
                await anyio.sleep(0.2)
        again = await client.call_tool(f"{SERVER}_whoami", {})
        assert not again.is_error and again.content[0].text.startswith("sub=test-user "), again
    assert len(rig.login_files()) == 1
    assert "\tauthorized" in rig.auth(setup, "status").stdout

    # A client that declines: the call says so, nothing is kept, loom stays up.
    for path in rig.login_files():
        path.unlink()

    async def declines(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with connect_loom(setup, "legacy", elicitation_callback=declines) as client:
        refused = await client.call_tool(f"{SERVER}_whoami", {})
        assert refused.is_error and "was declined" in refused.content[0].text, refused
    assert rig.login_files() == []


# ---------------------------------------------------------------------------------------------
# loom's HTTP face as an OAuth protected resource (`http.auth`, SPEC §22.1)

PYTHON_SERVER = Path(__file__).resolve().parent / "servers" / "python_server.py"


@contextmanager
def loom_http(
    rig: Rig,
    auth: dict[str, Any],
    name: str = "face",
    more: list[dict[str, Any]] | None = None,
    settings: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`loom serve --http 127.0.0.1:0` with `http.auth`, in front of servers/python_server.py
    (`py`) and the server entries `more` (`settings`: more top-level keys; `env`: over the
    rig's); its /mcp URL until the block ends."""
    import re
    import time

    config = rig.tmp / f"{name}.config.json"
    config.write_text(
        json.dumps(
            {
                "servers": [{"name": "py", "command": sys.executable, "args": [str(PYTHON_SERVER)]}, *(more or [])],
                "http": {"auth": auth},
                **(settings or {}),
            }
        )
    )
    log = rig.tmp / f"{name}.stderr"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(LOOM_BIN), "serve", "--http", "127.0.0.1:0", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            env={**os.environ, **rig.env(), "LOOM_LOG": "info", **(env or {})},
        )
    try:
        deadline = time.monotonic() + PATIENCE
        while (found := re.search(r"^loom: serving MCP at (http://\S+)$", log.read_text(errors="replace"), re.MULTILINE)) is None:
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "loom did not serve"
            time.sleep(0.05)
        yield found[1]
    finally:
        process.terminate()
        try:
            process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            process.kill()
        print(log.read_text(errors="replace")[-4000:], file=sys.stderr)


def raw_post(url: str, token: str | None, body: dict[str, Any] | None = None, extra: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    import urllib.error

    body = body or {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    headers.update(extra or {})
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def token_for(rig: Rig, resource: str, account: str = "test-user", scope: str = "mcp:read mcp:write") -> str:
    """An access token for `resource` from the rig's authorization server, as `account`: a
    client registered for the purpose, the code flow through browser.py, the code exchange."""
    import base64
    import hashlib
    import secrets
    import urllib.parse

    import browser  # noqa: PLC0415 — the rig's stand-in browser, a module of its own

    redirect = "http://127.0.0.1:9/callback"  # never requested: the code is read off the redirect
    registration = json.dumps({"redirect_uris": [redirect], "application_type": "native", "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"]}).encode()
    request = urllib.request.Request(f"{rig.as_url}/reg", data=registration, headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=PATIENCE) as answer:
        client_id = json.loads(answer.read())["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    query = {
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect, "scope": scope, "state": "s",
        "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource, "login_hint": account,
    }
    record = browser.run(f"{rig.as_url}/auth?{urllib.parse.urlencode(query)}", "approve")
    callback = record.get("callback") or record.get("callback_original")
    assert callback, record
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))["code"]
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier, "resource": resource, "client_id": client_id}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{rig.as_url}/token", data=form, method="POST"), timeout=PATIENCE) as answer:
        return json.loads(answer.read())["access_token"]


def forged(token: str, header: dict[str, Any]) -> str:
    """`token` with another header (its signature no longer matches; `alg` may say it needs none)."""
    import base64

    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    _, payload, signature = token.split(".")
    return f"{b64(header)}.{payload}.{signature if header.get('alg') != 'none' else ''}"


async def test_the_official_client_logs_in_to_loom_itself_and_its_subject_is_its_scope(rig: Rig) -> None:
    audit = rig.tmp / "audit.jsonl"
    with loom_http(rig, {"issuer": rig.as_url, "requiredScopes": ["mcp:read"]}, settings={"audit": {"path": str(audit)}}) as url:
        # What a client learns from the 401: where the metadata is, and from it the issuer.
        status, headers, _ = raw_post(url, None)
        metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert status == 401
        assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        with urllib.request.urlopen(metadata_url, timeout=PATIENCE) as answer:
            metadata = json.loads(answer.read())
        assert metadata["resource"] == url and metadata["authorization_servers"] == [rig.as_url]
        assert metadata["scopes_supported"] == ["mcp:read"] and metadata["bearer_methods_supported"] == ["header"]

        # The official Python SDK's own OAuth client completes the whole flow against loom
        # (PRM -> AS metadata -> registration -> PKCE -> token with loom as the audience).
        rig_for_loom = Rig(as_url=rig.as_url, mcp_url=url, tmp=rig.tmp)
        async with direct(rig_for_loom) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"py_inventory", "loom_query"} <= names
            result = await client.call_tool("py_inventory", {"count": 2000})
            envelope = json.loads(result.content[0].text)
            assert envelope["rows"] == 2000
            answer = await client.call_tool("loom_query", {"sql": f"SELECT COUNT(*) AS n FROM {envelope['ref']}"})
            assert json.loads(answer.content[0].text)["rows"] == [{"n": 2000}]
            ref = envelope["ref"]

        # Over 2026-07-28 (no sessions) a client's data lives in its subject's scope: a new token
        # of the same subject (a refresh, a second login) sees it, another subject never does.
        # The official SDK in its 2026-07-28 mode, with the token as its bearer.
        @asynccontextmanager
        async def as_2026(token: str) -> AsyncIterator[Client]:
            async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=PATIENCE) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28", read_timeout_seconds=PATIENCE) as client:
                    yield client

        async def datasets(client: Client) -> set[str]:
            listed = json.loads((await client.call_tool("loom_list_datasets", {})).content[0].text)
            return {d["ref"] for d in listed["datasets"]}

        alice, alice_again, bob = [await anyio.to_thread.run_sync(lambda who=who: token_for(rig, url, who)) for who in ("alice", "alice", "bob")]
        assert alice != alice_again
        async with as_2026(alice) as client:
            made = json.loads((await client.call_tool("py_inventory", {"count": 500})).content[0].text)["ref"]
        async with as_2026(alice_again) as client:
            assert made in await datasets(client)
            answer = await client.call_tool("loom_query", {"sql": f"SELECT COUNT(*) AS n FROM {made}"})
            assert json.loads(answer.content[0].text)["rows"] == [{"n": 500}]
        async with as_2026(bob) as client:
            assert made not in await datasets(client)
            refused = await client.call_tool("loom_query", {"sql": f"SELECT COUNT(*) AS n FROM {made}"})
            assert refused.is_error, refused
    # The audit log names each request's person as the issuer knows them (SPEC §24.3), and holds
    # none of their tokens.
    text = audit.read_text()
    subjects = {json.loads(line)["subject"] for line in text.splitlines()}
    assert {f"{rig.as_url} alice", f"{rig.as_url} bob"} <= subjects, subjects
    assert alice not in text and alice_again not in text and bob not in text



def test_tokens_loom_must_refuse(rig: Rig) -> None:
    with loom_http(rig, {"issuer": rig.as_url, "requiredScopes": ["mcp:read"]}) as url:
        good = token_for(rig, url)
        assert raw_post(url, good)[0] == 200
        cases = {
            "another audience": token_for(rig, "http://127.0.0.1:1/other"),
            "alg none": forged(good, {"alg": "none", "typ": "JWT"}),
            "an HMAC signed with the public key": forged(good, {"alg": "HS256", "typ": "JWT"}),
            "an unknown key": forged(good, {"alg": "RS256", "typ": "at+jwt", "kid": "not-a-key-of-the-issuer"}),
            "not a JWT": "opaque-token-123",
        }
        for what, token in cases.items():
            status, headers, body = raw_post(url, token)
            assert status == 401, (what, status, body)
            assert headers["www-authenticate"].startswith('Bearer error="invalid_token", resource_metadata='), (what, headers)
        # A token without the required scope: 403 insufficient_scope, naming it.
        status, headers, body = raw_post(url, token_for(rig, url, scope="mcp:write"))
        assert status == 403, body
        assert 'error="insufficient_scope", scope="mcp:read"' in headers["www-authenticate"]
        assert "mcp:read" in body
        # loom is still up and a good token still works.
        assert raw_post(url, good)[0] == 200


async def test_each_subject_of_the_http_face_logs_in_for_itself(rig: Rig) -> None:
    """With `http.auth`, a remote server that wants a login is logged in to by each subject of
    loom's HTTP face for itself (SPEC §4.7): alice is asked through URL elicitation (handshake
    era) and her browser comes back to loom's own /oauth/callback; bob, whose client takes no
    URL elicitation, is given the page in the answer; carol's 2026-07-28 client is asked with an
    `input_required` URL elicitation and its retry makes the call. Each sees the server as
    itself, never another's login; the machine's login (`loom auth login`) is not used."""
    import urllib.parse

    import browser  # noqa: PLC0415 — the rig's stand-in browser, a module of its own
    import mcp_types as types

    def open_as(page: str, who: str) -> dict[str, Any]:
        """`who` opens the page: the authorization server logs them in (its login_hint)."""
        return browser.run(f"{page}&{urllib.parse.urlencode({'login_hint': who})}", "approve")

    # The person at this machine logged in as test-user: a subject must never ride on that.
    setup = rig.setup()
    assert rig.auth(setup, "login", SERVER).returncode == 0
    with loom_http(rig, {"issuer": rig.as_url}, name="subjects", more=[{"name": SERVER, "url": rig.mcp_url}]) as url:
        callback = url.replace("/mcp", "/oauth/callback")

        @asynccontextmanager
        async def as_subject(token: str, mode: str, **kwargs: Any) -> AsyncIterator[Client]:
            async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=PATIENCE) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=PATIENCE, **kwargs) as client:
                    yield client

        async def tool_names(client: Client) -> set[str]:
            return {tool.name for tool in (await client.list_tools()).tools}

        alice, bob, carol = [await anyio.to_thread.run_sync(lambda who=who: token_for(rig, url, who)) for who in ("alice", "bob", "carol")]
        asked: list[dict[str, Any]] = []
        visits: list[dict[str, Any]] = []

        def person(who: str) -> Any:
            async def answer(context: Any, params: Any) -> types.ElicitResult:
                asked.append(params.model_dump(by_alias=True, exclude_none=True))
                visits.append(await anyio.to_thread.run_sync(open_as, params.url, who))
                return types.ElicitResult(action="accept")

            return answer

        async with as_subject(alice, "legacy", elicitation_callback=person("alice")) as client:
            assert f"{SERVER}_whoami" not in await tool_names(client) and "py_inventory" in await tool_names(client)
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_login" not in await tool_names(client):
                    await anyio.sleep(0.1)
            first = await client.call_tool(f"{SERVER}_whoami", {})
            assert first.is_error and f"logged in to `{SERVER}`" in first.content[0].text, first
            assert len(asked) == 1 and asked[0]["mode"] == "url" and asked[0]["url"].startswith(f"{rig.as_url}/auth?")
            sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(asked[0]["url"]).query))
            assert sent["redirect_uri"] == callback, sent
            assert visits[0]["callback"].startswith(callback + "?") and visits[0]["callback_status"] == 200, visits
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_whoami" not in await tool_names(client):
                    await anyio.sleep(0.2)
            again = await client.call_tool(f"{SERVER}_whoami", {})
            assert not again.is_error and again.content[0].text.startswith("sub=alice "), again

        # bob: no URL elicitation, so the page comes in the answer; alice's login is not his.
        async with as_subject(bob, "auto") as client:
            assert f"{SERVER}_whoami" not in await tool_names(client)
            offered = await client.call_tool(f"{SERVER}_whoami", {})
            assert offered.is_error, offered
            text = offered.content[0].text
            assert "needs you to log in" in text, text
            page = text.rsplit(" ", 1)[-1]
            assert page.startswith(f"{rig.as_url}/auth?"), text
            # A second call while the login waits gives the same page.
            pending = await client.call_tool(f"{SERVER}_echo", {"text": "x"})
            assert pending.is_error and page in pending.content[0].text, pending
            visit = await anyio.to_thread.run_sync(open_as, page, "bob")
            assert visit["callback_status"] == 200, visit
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_whoami" not in await tool_names(client):
                    await anyio.sleep(0.2)
            mine = await client.call_tool(f"{SERVER}_whoami", {})
            assert not mine.is_error and mine.content[0].text.startswith("sub=bob "), mine

        # carol over 2026-07-28: the login is an input_required URL elicitation, the SDK's
        # retry after it makes the call.
        async with as_subject(carol, "2026-07-28", elicitation_callback=person("carol")) as client:
            made = await client.call_tool(f"{SERVER}_whoami", {})
            assert not made.is_error and made.content[0].text.startswith("sub=carol "), made
            assert asked[-1]["mode"] == "url" and len(asked) == 2, asked
        # dave over 2026-07-28 asks for the login itself, with loom's `lin_login`.
        dave = await anyio.to_thread.run_sync(lambda: token_for(rig, url, "dave"))
        async with as_subject(dave, "2026-07-28", elicitation_callback=person("dave")) as client:
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_login" not in await tool_names(client):
                    await anyio.sleep(0.1)
            done = await client.call_tool(f"{SERVER}_login", {})
            assert not done.is_error and f"logged in to `{SERVER}`" in done.content[0].text, done
            assert len(asked) == 3
            mine = await client.call_tool(f"{SERVER}_whoami", {})
            assert not mine.is_error and mine.content[0].text.startswith("sub=dave "), mine

        # erin over 2026-07-28 declines: told so, and asked afresh on the next call (the declined
        # login no longer holds the server's one offered login for 300 s).
        erin = await anyio.to_thread.run_sync(lambda: token_for(rig, url, "erin"))
        declined: list[str] = []

        async def declines(context: Any, params: Any) -> types.ElicitResult:
            declined.append(params.url)
            return types.ElicitResult(action="decline")

        async with as_subject(erin, "2026-07-28", elicitation_callback=declines) as client:
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_login" not in await tool_names(client):
                    await anyio.sleep(0.1)
            for _ in range(2):
                answer = await client.call_tool(f"{SERVER}_login", {})
                assert answer.is_error and "not logged in" in answer.content[0].text, answer
            assert len(declined) == 2 and declined[0] != declined[1], declined

        # alice again, a new session: still herself, asked nothing more.
        async with as_subject(alice, "auto") as client:
            with anyio.fail_after(PATIENCE):
                while f"{SERVER}_whoami" not in await tool_names(client):
                    await anyio.sleep(0.2)
            assert (await client.call_tool(f"{SERVER}_whoami", {})).content[0].text.startswith("sub=alice ")
            assert f"{SERVER}_login" not in await tool_names(client)
        assert len(asked) == 3

        # A redirect nobody waits for (replayed, or forged) is refused and keeps nothing.
        status, _, body = raw_get(visits[0]["callback"])
        assert status == 400 and "No login of loom" in body, (status, body)
        status, _, _ = raw_get(f"{callback}?code=x&state=forged")
        assert status == 400
    subjects = rig.server_stats()["subjects"]
    assert {"alice", "bob", "carol", "dave"} <= set(subjects), subjects
    # The machine's login plus one per subject, each its own file.
    assert len(rig.login_files()) == 5


def raw_get(url: str) -> tuple[int, dict[str, str], str]:
    import urllib.error

    try:
        with urllib.request.urlopen(url, timeout=PATIENCE) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_a_2025_session_outlives_its_token_for_the_same_subject_only(rig: Rig) -> None:
    """A session of the `initialize` era belongs to its token's subject, not to the token's
    bytes (SPEC §22.1): a new token of the same subject (a refresh, a second login) goes on in
    the session; another subject's token finds no such session."""
    with loom_http(rig, {"issuer": rig.as_url}, name="sessions") as url:
        alice, alice_again, bob = [token_for(rig, url, who) for who in ("alice", "alice", "bob")]
        assert alice != alice_again
        status, headers, _ = raw_post(url, alice)
        assert status == 200
        session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        extra = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        raw_post(url, alice, {"jsonrpc": "2.0", "method": "notifications/initialized"}, extra)
        status, _, body = raw_post(url, alice_again, listing, extra)
        assert status == 200 and "py_inventory" in body, (status, body[:500])
        status, _, body = raw_post(url, bob, listing, extra)
        assert status == 404, (status, body[:500])
        # alice's session is still hers.
        assert raw_post(url, alice, listing, extra)[0] == 200


def test_an_http_face_on_every_address_must_say_its_audience(rig: Rig) -> None:
    """On 0.0.0.0 loom cannot know the URL clients reach it at, which its tokens are issued for:
    it does not start without `http.auth.audience`, and says so."""
    config = rig.tmp / "everywhere.json"
    config.write_text(json.dumps({"servers": [{"name": "py", "command": sys.executable, "args": [str(PYTHON_SERVER)]}], "http": {"auth": {"issuer": rig.as_url}}}))
    done = subprocess.run(
        [str(LOOM_BIN), "serve", "--http", "0.0.0.0:0", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PATIENCE,
    )  # fmt: skip
    assert done.returncode == 1 and "`http.auth.audience` is needed when loom listens on 0.0.0.0" in done.stderr, done.stderr


async def test_two_looms_sharing_a_login_refresh_it_one_at_a_time(tmp_path: Path) -> None:
    """Two loom processes (a desktop client's and an editor's) share one login file. The
    authorization server rotates refresh tokens and treats a used one as stolen (it revokes the
    grant): loom refreshes under a lock on the login, so when both find the token expired at
    once, one refreshes and the other takes (or refreshes) the result — both keep working, and
    nobody is asked to log in again (SPEC §4.7). The token endpoint answers 400 ms late, so the
    two refreshes overlap."""
    from conftest import connect_loom

    with rig_on(tmp_path, AS_TOKEN_DELAY_MS="400") as rig:
        await both_refresh(rig)


async def both_refresh(rig: Rig) -> None:
    from conftest import connect_loom

    setup = rig.setup()
    assert rig.auth(setup, "login", SERVER).returncode == 0
    async with connect_loom(setup, "legacy") as first, connect_loom(setup, "auto") as second:
        for client in (first, second):
            assert (await client.call_tool(f"{SERVER}_whoami", {})).content[0].text.startswith("sub=test-user ")
        for _ in range(3):
            await anyio.sleep(ACCESS_TTL + 0.5)
            answers: list[Any] = [None, None]

            async def call(index: int, client: Client) -> None:
                answers[index] = await client.call_tool(f"{SERVER}_whoami", {})

            async with anyio.create_task_group() as group:
                group.start_soon(call, 0, first)
                group.start_soon(call, 1, second)
            for answer in answers:
                assert not answer.is_error and answer.content[0].text.startswith("sub=test-user "), answer
    assert rig.as_stats()["tokens"].get("refresh_token", 0) >= 3
    assert "\tauthorized" in rig.auth(setup, "status").stdout


@pytest.mark.parametrize("era", ["legacy", "auto", "modern"])
async def test_the_inspector_with_a_token_logs_in_to_a_remote_server_through_loom(rig: Rig, era: str) -> None:
    """The Inspector CLI in each of its eras, with a subject's access token as its header: loom's
    protected face serves it, a large result comes back as an envelope, and a remote server
    that wants a login gives this subject the page in the answer (the Inspector takes no URL
    elicitation); once the subject has been there, the call goes through as them. Without the
    token the Inspector is refused."""
    import urllib.parse

    import browser  # noqa: PLC0415 — the rig's stand-in browser, a module of its own
    from test_http_serve import _inspector

    who = f"inspector-{era}"
    home = rig.tmp / f"inspector-home-{era}"
    # requiredScopes: the Inspector registers with the scopes the metadata names (without any
    # it asks oidc-provider for an empty `scope`, which it refuses).
    with loom_http(rig, {"issuer": rig.as_url, "requiredScopes": ["mcp:read"]}, name=f"inspector-{era}", more=[{"name": SERVER, "url": rig.mcp_url}]) as url:
        token = await anyio.to_thread.run_sync(lambda: token_for(rig, url, who))
        header = ("--header", f"Authorization: Bearer {token}")

        def inspect(*args: str) -> tuple[int, dict[str, Any], str]:
            return _inspector(url, era, home, *header, *args)

        status, listed, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/list")
        assert status == 0 and "py_inventory" in {t["name"] for t in listed["result"]["tools"]}, (listed, stderr[-2000:])
        status, called, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/call", "--tool-name", "py_inventory", "--tool-args-json", json.dumps({"count": 2000}))
        assert status == 0 and assert_envelope(called["result"], "inventory (Inspector)")["rows"] == 2000, stderr[-2000:]

        # The server's tools are not listed before the login; loom's `lin_login` is (once the
        # subject's own connection has met the server's 401).
        names = {t["name"] for t in listed["result"]["tools"]}
        with anyio.fail_after(PATIENCE):
            while f"{SERVER}_login" not in names:
                await anyio.sleep(0.2)
                status, listed, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/list")
                names = {t["name"] for t in listed["result"]["tools"]}
        assert f"{SERVER}_whoami" not in names, sorted(names)
        status, offered, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/call", "--tool-name", f"{SERVER}_login")
        assert "result" in offered, (offered, stderr[-2000:])
        text = text_of(offered["result"])
        assert "needs you to log in" in text and "its tools are listed once you have" in text, (offered, stderr[-2000:])
        page = text.rsplit(" ", 1)[-1]
        visit = await anyio.to_thread.run_sync(lambda: browser.run(f"{page}&{urllib.parse.urlencode({'login_hint': who})}", "approve"))
        assert visit["callback_status"] == 200, visit
        with anyio.fail_after(PATIENCE):
            while True:
                status, mine, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/call", "--tool-name", f"{SERVER}_whoami")
                if status == 0 and not mine["result"].get("isError"):
                    break
                await anyio.sleep(0.3)
        assert text_of(mine["result"]).startswith(f"sub={who} "), mine
        status, listed, stderr = await anyio.to_thread.run_sync(inspect, "--method", "tools/list")
        assert f"{SERVER}_login" not in {t["name"] for t in listed["result"]["tools"]}

        refused = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [str(x) for x in _inspector_command(url, era)] + ["--method", "tools/list"],
            capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, timeout=2 * PATIENCE,
        ))  # fmt: skip
        # Refused: the Inspector reads loom's 401 and metadata as a login it would have to make.
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "auth_required" in said, said[-2000:]

        # With its own OAuth client (auto-open on, browser.py opening the page it names), the
        # Inspector logs in to loom itself and is served as its subject.
        own = await anyio.to_thread.run_sync(lambda: _inspector_logs_in(url, era, rig.tmp / f"inspector-oauth-{era}", f"{who}-own"))
        assert own.get("result") and "py_inventory" in {t["name"] for t in own["result"]["tools"]}, own


def _inspector_command(url: str, era: str) -> list[Any]:
    from test_dataplane_inspector import INSPECTOR_CLI, NODE22

    return [NODE22, INSPECTOR_CLI, "--format", "json", "--protocol-era", era, "--connect-timeout", str(int(PATIENCE * 1000)), "--transport", "http", "--server-url", url]


def _inspector_logs_in(url: str, era: str, home: Path, who: str) -> dict[str, Any]:
    """The Inspector CLI's own OAuth against loom's face: it prints the page to open on stderr;
    browser.py opens it as `who`, the Inspector takes the code on its own callback, lists the
    tools."""
    import threading
    import urllib.parse

    import browser  # noqa: PLC0415

    home.mkdir(exist_ok=True)
    answer = home / "stdout.json"
    process = subprocess.Popen(
        [str(x) for x in _inspector_command(url, era)] + ["--method", "tools/list"],
        stdin=subprocess.DEVNULL, stdout=answer.open("w"), stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(home), "MCP_AUTO_OPEN_ENABLED": "true", "MCP_INSPECTOR_SECRET_STORE": "memory"},
    )  # fmt: skip
    seen: list[str] = []

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if "navigate to:" in line:
                page = line.split("navigate to:", 1)[1].strip()
                browser.run(f"{page}&{urllib.parse.urlencode({'login_hint': who})}", "approve")

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        process.wait(timeout=2 * PATIENCE)
    finally:
        process.kill()
    reader.join(5)
    out = answer.read_text()
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise AssertionError(f"the Inspector printed no JSON (exit {process.returncode}): {out[-2000:]}\n{''.join(seen)[-3000:]}") from None


async def test_without_a_home_a_server_that_asks_for_a_login_says_why_there_is_none(rig: Rig) -> None:
    """With neither HOME nor XDG_STATE_HOME set (some launchers start servers so), loom has
    nowhere to keep logins: a server that asks for one is failed with a message that says so,
    the others serve on."""
    from mcp import StdioServerParameters

    from conftest import connect

    config = rig.tmp / "homeless.json"
    servers = {SERVER: {"url": rig.mcp_url}, "py": {"command": sys.executable, "args": [str(PYTHON_SERVER)]}}
    config.write_text(json.dumps({"mcpServers": servers, "restart": {"maxAttempts": 1}}))
    params = StdioServerParameters(
        command="/usr/bin/env",
        args=["-u", "HOME", "-u", "XDG_STATE_HOME", str(LOOM_BIN), "--config", str(config)],
        env={"PATH": os.environ.get("PATH", ""), "LOOM_LOG": "warn"},
    )
    async with connect(params, mode="legacy") as client:
        categories = await client.call_tool("loom_tool_categories", {})
        states = {entry["server"]: entry["state"] for entry in categories.structured_content["servers"]}
        assert "neither XDG_STATE_HOME nor HOME is set" in states[SERVER], states
        assert not (await client.call_tool("loom_query", {"sql": "SELECT 1 AS one"})).is_error


def test_a_client_the_authorization_server_forgot_is_registered_anew(tmp_path: Path) -> None:
    """loom remembers the client it registered with an authorization server; when that server
    restarts without its registrations, the next login registers anew instead of sending the
    person to the server's `invalid_client` page (SPEC §4.7)."""
    from conftest import free_port

    port = free_port()
    env = {"AS_ACCESS_TTL": "60"}

    def login_once(name: str) -> tuple[Rig, subprocess.CompletedProcess[str], dict[str, Any]]:
        with started(["node", str(RIG / "as.mjs"), str(port)], "AS_URL=", tmp_path / f"{name}-as.log", env) as as_url:
            server = [sys.executable, str(RIG / "protected_server.py"), "--as", as_url, "--port", "0"]
            with started(server, "MCP_URL=", tmp_path / f"{name}-server.log", {}) as mcp_url:
                rig = Rig(as_url=as_url, mcp_url=mcp_url, tmp=tmp_path)
                done = rig.auth(rig.setup(), "login", SERVER)
                return rig, done, rig.as_stats()

    _, first, before = login_once("first")
    assert first.returncode == 0 and before["registrations"] == 1, (first.stderr, before)
    # The same issuer again (same port), its memory gone.
    _, second, after = login_once("second")
    assert second.returncode == 0, second.stderr
    assert after["registrations"] == 1 and after["authorizations"] >= 1, after
