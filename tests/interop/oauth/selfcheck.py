"""Proves the OAuth rig works without loom: starts as.mjs and protected_server.py, then

  1. raw checks: the 401 and its WWW-Authenticate, Protected Resource Metadata, AS metadata
     (RFC 8414 and OIDC paths, `authorization_response_iss_parameter_supported`);
  2. the official Python SDK 2.x client's own OAuth flow (OAuthClientProvider: PRM and AS
     discovery, DCR, PKCE, RFC 8707 resource, RFC 9207 iss check) with browser.py as the user's
     browser, then `whoami`, `big_table`; waits out the short access token TTL and calls again, so
     the SDK refreshes (the AS's and the server's counters show it);
  3. findings by hand: RFC 8252 loopback port flexibility (native vs web clients), the JWT's
     header and `aud`, refresh token rotation and reuse, browser.py's deny / tamper-state /
     wrong-iss / none modes, POST /test/revoke, the static confidential client, AS_NO_REGISTRATION.

    .ci/venv/bin/python tests/interop/oauth/selfcheck.py      (node on PATH, .ci/node installed)

Prints each check; exits 1 on the first failure. Logs of the servers go to a temp directory.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import browser  # noqa: E402
from rig import Callback, MemoryStorage  # noqa: E402
from rig import started as started_logged  # noqa: E402

LOGS = Path(tempfile.mkdtemp(prefix="oauth-selfcheck-"))
STATIC_ID, STATIC_SECRET = "static-client", "static-secret-123"


def ok(what: str) -> None:
    print(f"ok    {what}", flush=True)


def check(condition: Any, what: str) -> None:
    if not condition:
        print(f"FAIL  {what}\n      logs in {LOGS}", flush=True)
        sys.exit(1)
    ok(what)


# ---------------------------------------------------------------------------------------------
# Processes


def started(argv: list[str], prefix: str, name: str, env: dict[str, str] | None = None):
    """rig.started with the log under LOGS as NAME.log."""
    return started_logged(argv, prefix, LOGS / f"{name}.log", env)


# ---------------------------------------------------------------------------------------------
# Plain HTTP


def call(method: str, url: str, body: Any = None, form: dict[str, str] | None = None, auth: tuple[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    headers = {"accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    if auth:
        headers["authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, head, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, head, raw = error.code, dict(error.headers), error.read()
    try:
        return status, head, json.loads(raw)
    except ValueError:
        return status, head, raw.decode("utf-8", "replace")


def jwt_parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    def part(text: str) -> dict[str, Any]:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))

    header, payload, _ = token.split(".")
    return part(header), part(payload)


def pkce() -> tuple[str, str]:
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorize(as_url: str, client_id: str, redirect_uri: str, resource: str, mode: str = "approve", scope: str = "mcp:read mcp:write") -> tuple[dict[str, Any], str, str]:
    """An authorization request through browser.run: (browser record, state, code_verifier)."""
    verifier, challenge = pkce()
    state = f"st-{time.monotonic_ns()}"
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": scope,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    return browser.run(f"{as_url}/auth?{urllib.parse.urlencode(query)}", mode), state, verifier


def code_exchange(as_url: str, client_id: str, redirect_uri: str, code: str, verifier: str, resource: str, auth: tuple[str, str] | None = None) -> tuple[int, Any]:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": verifier, "resource": resource}
    if not auth:
        form["client_id"] = client_id
    status, _, body = call("POST", f"{as_url}/token", form=form, auth=auth)
    return status, body


def refresh(as_url: str, client_id: str, token: str, auth: tuple[str, str] | None = None) -> tuple[int, Any]:
    form = {"grant_type": "refresh_token", "refresh_token": token}
    if not auth:
        form["client_id"] = client_id
    status, _, body = call("POST", f"{as_url}/token", form=form, auth=auth)
    return status, body


def bearer_status(mcp_url: str, token: str) -> int:
    """The status of an initialize request to the MCP server with this bearer token."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "selfcheck", "version": "0"}}}
    request = urllib.request.Request(mcp_url, data=json.dumps(body).encode(), headers={"authorization": f"Bearer {token}", "content-type": "application/json", "accept": "application/json, text/event-stream"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def query_of(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


# ---------------------------------------------------------------------------------------------
# 1. raw checks


def raw_checks(as_url: str, mcp_url: str) -> None:
    status, head, body = call("POST", mcp_url, body={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    www = head.get("WWW-Authenticate") or head.get("www-authenticate") or ""
    check(status == 401 and 'resource_metadata="' in www, f"no token: 401, WWW-Authenticate: {www}")
    prm_url = www.split('resource_metadata="')[1].split('"')[0]
    status, _, prm = call("GET", prm_url)
    check(status == 200 and prm["resource"] == mcp_url and prm["authorization_servers"] == [as_url], f"PRM {prm_url}: {json.dumps(prm)}")
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        status, _, meta = call("GET", as_url + path)
        check(status == 200 and meta["issuer"] == as_url and meta["authorization_response_iss_parameter_supported"] is True and meta["code_challenge_methods_supported"] == ["S256"], f"AS metadata {path}: issuer, iss parameter supported, S256 only, registration_endpoint {meta.get('registration_endpoint')}")
    check(bearer_status(mcp_url, "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.") == 401, "a forged (alg none) token: 401")


# ---------------------------------------------------------------------------------------------
# 2. the Python SDK's own OAuth client


async def sdk_flow(as_url: str, mcp_url: str, wait: float, max_age: float | None = None) -> None:
    callback = Callback()
    storage = MemoryStorage()
    browser_log = LOGS / "browser.jsonl"
    opened: list[str] = []

    async def redirect_handler(url: str) -> None:
        # What loom does: start $BROWSER with the URL and not wait for it.
        opened.append(url)
        subprocess.Popen([sys.executable, str(HERE / "browser.py"), url], env={**os.environ, "LOOM_TEST_BROWSER_LOG": str(browser_log)})

    async def callback_handler() -> AuthorizationCodeResult:
        with anyio.fail_after(30):
            while not callback.received:
                await anyio.sleep(0.05)
        got = callback.received.pop(0)
        return AuthorizationCodeResult(code=got["code"], state=got.get("state"), iss=got.get("iss"))

    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(client_name="selfcheck", redirect_uris=[callback.uri], token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http), read_timeout_seconds=30) as client:
            result = await client.call_tool("whoami", {})
            whoami = result.content[0].text
            print(f"      whoami: {whoami}")
            check(whoami.startswith("sub=test-user ") and "mcp:read" in whoami, "SDK OAuth flow (DCR, PKCE, resource, iss) then whoami")
            query = query_of(opened[0])
            ok(f"SDK's authorization request: scope={query.get('scope')!r} resource={query.get('resource')!r} prompt={query.get('prompt')!r}")
            header, claims = jwt_parts(storage.tokens.access_token)
            ok(f"access token: header {header}, aud {claims['aud']!r}, scope {claims.get('scope')!r}, exp-iat {claims['exp'] - claims['iat']} s")
            check(storage.tokens.refresh_token, f"refresh token issued to the SDK client (expires_in {storage.tokens.expires_in})")
            table = await client.call_tool("big_table", {})
            rows = json.loads(table.content[0].text)
            check(len(rows) == 5000 and len(table.content) == 1, f"big_table: {len(rows)} rows in one text block ({len(table.content[0].text)} chars)")
            first_refresh = storage.tokens.refresh_token
            before = json.loads((await client.call_tool("auth_stats", {})).content[0].text)
            _, _, as_before = call("GET", f"{as_url}/test/stats")
            await anyio.sleep(wait)
            result = await client.call_tool("whoami", {})
            why = "access token expired" if max_age is None else f"token older than the server's max age {max_age} s, not expired"
            check(result.content[0].text.startswith("sub=test-user"), f"whoami after {wait} s ({why})")
            stats = json.loads((await client.call_tool("auth_stats", {})).content[0].text)
            print(f"      server stats: {json.dumps(stats)}")
            check(stats["tokens_accepted"] == before["tokens_accepted"] + 1, "the server saw a second access token")
            _, _, as_stats = call("GET", f"{as_url}/test/stats")
            print(f"      AS stats: {json.dumps(as_stats)}")
            grants = {kind: as_stats["tokens"].get(kind, 0) - as_before["tokens"].get(kind, 0) for kind in ("authorization_code", "refresh_token")}
            ok(f"meanwhile: {stats['status_401'] - before['status_401']} 401s from the server, grants at the AS {grants}, browser opened {len(opened)} times")
            if max_age is None:
                check(grants == {"authorization_code": 0, "refresh_token": 1}, "the SDK refreshed (before sending: expires_in had passed)")
                check(storage.tokens.refresh_token != first_refresh, "the refresh token was rotated")
            else:
                check(stats["status_401"] > before["status_401"], "the server answered 401 to the old token")
    log = [json.loads(line) for line in browser_log.read_text().splitlines()]
    check(log and log[0]["callback_status"] == 200, f"browser.py log: {len(log[0]['steps'])} steps, callback status {log[0]['callback_status']}")
    callback.close()


# ---------------------------------------------------------------------------------------------
# 3. findings


def findings(as_url: str, mcp_url: str) -> None:
    port_a, port_b = Callback(), Callback()
    # RFC 8252: a native client registered with port A, redirected to port B
    for app_type in ("native", "web"):
        reg = {"redirect_uris": [port_a.uri], "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "scope": "mcp:read mcp:write"}
        if app_type == "native":
            reg["application_type"] = "native"
        status, _, client = call("POST", f"{as_url}/reg", body=reg)
        check(status == 201, f"DCR ({'application_type native' if app_type == 'native' else 'no application_type: web'}) with {port_a.uri}: {client.get('client_id')}")
        record, state, verifier = authorize(as_url, client["client_id"], port_b.uri, mcp_url)
        if app_type == "native":
            check(record.get("callback_status") == 200 and port_b.received, f"native client: redirect_uri on another port ({port_b.port} instead of {port_a.port}) accepted (RFC 8252 §7.3)")
            got = port_b.received.pop()
            check(got.get("state") == state and got.get("iss") == as_url, f"callback carries state and iss={got.get('iss')} (RFC 9207)")
            status, tokens = code_exchange(as_url, client["client_id"], port_b.uri, got["code"], verifier, mcp_url)
            check(status == 200, f"code exchange: token_type {tokens.get('token_type')}, scope {tokens.get('scope')!r}, expires_in {tokens.get('expires_in')}, refresh_token {'yes' if tokens.get('refresh_token') else 'no'}")
            header, claims = jwt_parts(tokens["access_token"])
            check(header["alg"] == "RS256" and claims["aud"] == mcp_url and claims["iss"] == as_url, f"JWT: typ {header.get('typ')}, aud {claims['aud']!r} (a string), client_id claim {claims.get('client_id')!r}")
            native = client
            native_tokens = tokens
        else:
            check("error" in record and not port_b.received, f"web client: another port refused ({record.get('error', '')[:110]})")
    # refresh rotation and reuse
    status, first = refresh(as_url, native["client_id"], native_tokens["refresh_token"])
    check(status == 200 and first["refresh_token"] != native_tokens["refresh_token"], "refresh: new access token and a new (rotated) refresh token")
    _, claims = jwt_parts(first["access_token"])
    check(claims["aud"] == mcp_url, "refreshed token keeps aud (granted resource, no resource param sent)")
    status, reused = refresh(as_url, native["client_id"], native_tokens["refresh_token"])
    check(status == 400 and reused["error"] == "invalid_grant", f"reusing the old refresh token: {status} {reused['error']}")
    status, after = refresh(as_url, native["client_id"], first["refresh_token"])
    check(status == 400, f"after reuse was detected the newer refresh token is revoked too: {status} {after.get('error')}")
    # /test/revoke
    record, state, verifier = authorize(as_url, native["client_id"], port_b.uri, mcp_url)
    got = port_b.received.pop()
    _, tokens = code_exchange(as_url, native["client_id"], port_b.uri, got["code"], verifier, mcp_url)
    _, _, revoked = call("POST", f"{as_url}/test/revoke")
    status, body = refresh(as_url, native["client_id"], tokens["refresh_token"])
    check(status == 400 and body["error"] == "invalid_grant", f"POST /test/revoke {revoked} -> refresh: {status} {body['error']}")
    # browser modes
    record, state, _ = authorize(as_url, native["client_id"], port_b.uri, mcp_url, mode="deny")
    got = port_b.received.pop()
    check(got.get("error") == "access_denied" and got.get("state") == state and got.get("iss") == as_url, f"mode deny: callback {got}")
    record, state, _ = authorize(as_url, native["client_id"], port_b.uri, mcp_url, mode="tamper-state")
    got = port_b.received.pop()
    check(got.get("state") == state + "-tampered" and "code" in got, "mode tamper-state: callback state changed, code kept")
    record, state, _ = authorize(as_url, native["client_id"], port_b.uri, mcp_url, mode="wrong-iss")
    got = port_b.received.pop()
    check(got.get("iss") == browser.WRONG_ISS and got.get("state") == state, f"mode wrong-iss: iss={got.get('iss')}")
    record, _, _ = authorize(as_url, native["client_id"], port_b.uri, mcp_url, mode="none")
    check(not record["steps"] and not port_b.received, "mode none: nothing requested")
    # without a resource: an opaque token the server refuses
    verifier, challenge = pkce()
    q = {"response_type": "code", "client_id": native["client_id"], "redirect_uri": port_b.uri, "scope": "mcp:read", "state": "s", "code_challenge": challenge, "code_challenge_method": "S256"}
    browser.run(f"{as_url}/auth?{urllib.parse.urlencode(q)}")
    got = port_b.received.pop()
    status, _, tokens = call("POST", f"{as_url}/token", form={"grant_type": "authorization_code", "code": got["code"], "redirect_uri": port_b.uri, "code_verifier": verifier, "client_id": native["client_id"]})
    check(status == 200 and tokens["access_token"].count(".") != 2 and bearer_status(mcp_url, tokens["access_token"]) == 401, f"no resource parameter: an opaque access token ({len(tokens['access_token'])} chars); the server answers 401")
    # a token for another resource, and one without the required scope
    other = "http://127.0.0.1:9/other/mcp"
    record, state, verifier = authorize(as_url, native["client_id"], port_b.uri, other)
    got = port_b.received.pop()
    _, tokens = code_exchange(as_url, native["client_id"], port_b.uri, got["code"], verifier, other)
    check(jwt_parts(tokens["access_token"])[1]["aud"] == other and bearer_status(mcp_url, tokens["access_token"]) == 401, "a JWT for another resource (aud): 401")
    record, state, verifier = authorize(as_url, native["client_id"], port_b.uri, mcp_url, scope="mcp:write")
    got = port_b.received.pop()
    _, tokens = code_exchange(as_url, native["client_id"], port_b.uri, got["code"], verifier, mcp_url)
    check(tokens.get("scope") == "mcp:write" and bearer_status(mcp_url, tokens["access_token"]) == 403, "a JWT with scope mcp:write only: 403 insufficient_scope")
    # without PKCE
    q = {"response_type": "code", "client_id": native["client_id"], "redirect_uri": port_b.uri, "scope": "mcp:read", "state": "s", "resource": mcp_url}
    browser.run(f"{as_url}/auth?{urllib.parse.urlencode(q)}")
    got = port_b.received.pop()
    check(got.get("error") == "invalid_request", f"no code_challenge: {got.get('error')}: {got.get('error_description')}")
    # the static confidential client
    record, state, verifier = authorize(as_url, STATIC_ID, port_b.uri, mcp_url)
    got = port_b.received.pop()
    status, tokens = code_exchange(as_url, STATIC_ID, port_b.uri, got["code"], verifier, mcp_url, auth=(STATIC_ID, STATIC_SECRET))
    check(status == 200 and jwt_parts(tokens["access_token"])[1]["client_id"] == STATIC_ID and tokens.get("refresh_token"), "static client (client_secret_basic, any loopback port): code -> JWT + refresh token")
    status, wrong = code_exchange(as_url, STATIC_ID, port_b.uri, "x", verifier, mcp_url, auth=(STATIC_ID, "wrong"))
    check(status == 401 and wrong["error"] == "invalid_client", "static client with a wrong secret: 401 invalid_client")
    port_a.close()
    port_b.close()


def main() -> None:
    ttl = 3
    as_argv = ["node", str(HERE / "as.mjs"), "0"]
    env = {"AS_ACCESS_TTL": str(ttl), "AS_STATIC_CLIENT_ID": STATIC_ID, "AS_STATIC_CLIENT_SECRET": STATIC_SECRET}
    with started(as_argv, "AS_URL=", "as", env) as as_url:
        with started([sys.executable, str(HERE / "protected_server.py"), "--as", as_url], "MCP_URL=", "mcp") as mcp_url:
            print(f"AS {as_url}  MCP {mcp_url}  logs {LOGS}")
            raw_checks(as_url, mcp_url)
            anyio.run(sdk_flow, as_url, mcp_url, ttl + 1.5)
            findings(as_url, mcp_url)
        with started([sys.executable, str(HERE / "protected_server.py"), "--as", as_url, "--max-token-age", "1"], "MCP_URL=", "mcp-maxage") as mcp_url:
            print(f"MCP {mcp_url} with --max-token-age 1 (token TTL {ttl} s)")
            anyio.run(sdk_flow, as_url, mcp_url, 1.5, 1.0)
    with started(as_argv, "AS_URL=", "as-noreg", {"AS_NO_REGISTRATION": "1"}) as as_url:
        _, _, meta = call("GET", f"{as_url}/.well-known/oauth-authorization-server")
        status, _, _ = call("POST", f"{as_url}/reg", body={"redirect_uris": ["http://127.0.0.1/callback"]})
        check("registration_endpoint" not in meta and status == 404, f"AS_NO_REGISTRATION=1: no registration_endpoint in metadata, POST /reg {status}")
    print("selfcheck passed")


if __name__ == "__main__":
    main()
