"""Subjects' OAuth logins across several `loom serve --http` instances (`cluster` with
`http.auth`, SPEC §25 and §4.7), with the OAuth rig of test_oauth.py (oidc-provider as the
authorization server, an OAuth-protected MCP server) and the official Python SDK 2.x:

    SDK 2.x --HTTP (OAuth token)--> loom A | B | C --HTTP (the subject's own login)--> protected server
                                        \\____ one cluster store ____/

A subject's login is started on one instance; the browser comes back (as behind a balancer) to
another instance, which hands the redirect to the instance whose login waits for it; the login
then serves the subject on every instance — each keeps its logins in a folder of its own, so the
tokens can only come through the store, sealed.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import PATIENCE
from test_oauth import SERVER, Rig, loom_http, raw_get, rig_on, token_for

pytestmark = pytest.mark.anyio

# Where the authorization server sends browsers back: nothing listens there, so the test's
# browser stops and the test delivers the redirect to the instance a balancer would pick.
AUDIENCE = "http://127.0.0.1:9/mcp"
SECRET = "interop-cluster-oauth-secret-" + "7c" * 16


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    # Face tokens live a minute: the test outlasts the rig's default 4 s.
    with rig_on(tmp_path, AS_ACCESS_TTL="60") as rig:
        yield rig


def instance(rig: Rig, name: str, store: Path):
    """One `loom serve --http` with `http.auth` (every instance the same audience, as behind one
    URL), the protected server, the cluster store, and a login folder of its own."""
    return loom_http(
        rig,
        {"issuer": rig.as_url, "audience": AUDIENCE},
        name=name,
        more=[{"name": SERVER, "url": rig.mcp_url}],
        settings={"cluster": {"store": str(store), "secret": "${LOOM_CLUSTER_SECRET}"}},
        env={"LOOM_CLUSTER_SECRET": SECRET, "XDG_STATE_HOME": str(rig.tmp / f"state-{name}")},
    )


@asynccontextmanager
async def as_subject(url: str, token: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=PATIENCE) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=PATIENCE) as client:
            yield client


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def wait_for_tool(client: Client, name: str) -> None:
    with anyio.fail_after(PATIENCE):
        while name not in await tool_names(client):
            await anyio.sleep(0.2)


async def test_a_login_started_on_one_instance_comes_back_to_another_and_serves_every_instance(rig: Rig) -> None:
    import browser  # noqa: PLC0415 — the rig's stand-in browser (on sys.path through test_oauth)

    store = rig.tmp / "cluster-store"
    with ExitStack() as stack:
        urls = [stack.enter_context(instance(rig, name, store)) for name in ("a", "b", "c")]
        origin = lambda url: url.removesuffix("/mcp")  # noqa: E731
        bob = await anyio.to_thread.run_sync(lambda: token_for(rig, AUDIENCE, "bob"))

        # Bob has sessions on B and C already: there, too, the server waits for his login.
        for url in urls[1:]:
            async with as_subject(url, bob) as client:
                await wait_for_tool(client, f"{SERVER}_login")
        # On instance A: the server wants bob's own login; the page comes in the answer.
        async with as_subject(urls[0], bob) as client:
            offered = await client.call_tool(f"{SERVER}_whoami", {})
        assert offered.is_error and "needs you to log in" in offered.content[0].text, offered
        page = offered.content[0].text.rsplit(" ", 1)[-1]
        sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page).query))
        assert sent["redirect_uri"] == "http://127.0.0.1:9/oauth/callback", sent

        # Bob's browser logs in; the balancer sends its redirect to instance B.
        visit = await anyio.to_thread.run_sync(lambda: browser.run(f"{page}&{urllib.parse.urlencode({'login_hint': 'bob'})}", "approve"))
        redirect = visit["callback"]
        assert redirect.startswith("http://127.0.0.1:9/oauth/callback?"), visit
        status, _, body = await anyio.to_thread.run_sync(lambda: raw_get(redirect.replace("http://127.0.0.1:9", origin(urls[1]))))
        assert status == 200, body
        # Delivered once: the same redirect again, on any instance, is a page loom lost.
        for n in (1, 2, 0):
            again, _, _ = await anyio.to_thread.run_sync(lambda n=n: raw_get(redirect.replace("http://127.0.0.1:9", origin(urls[n]))))
            assert again == 400

        # The login serves bob on every instance, each with its own connection to the server:
        # on C called at once (the call takes the login from the store rather than offering
        # another), on A and B once listed.
        async with as_subject(urls[2], bob) as client:
            mine = await client.call_tool(f"{SERVER}_whoami", {})
        assert not mine.is_error and mine.content[0].text.startswith("sub=bob "), mine
        for url in urls[:2]:
            async with as_subject(url, bob) as client:
                await wait_for_tool(client, f"{SERVER}_whoami")
                mine = await client.call_tool(f"{SERVER}_whoami", {})
            assert not mine.is_error and mine.content[0].text.startswith("sub=bob "), mine

        # Another subject has no login on any instance.
        carol = await anyio.to_thread.run_sync(lambda: token_for(rig, AUDIENCE, "carol"))
        for url in urls:
            async with as_subject(url, carol) as client:
                assert f"{SERVER}_whoami" not in await tool_names(client)

        # An OAuth subject is a scope of the cluster: bob's dataset minted on A is answered on
        # C (a new token of his, the same subject), never for carol.
        async with as_subject(urls[0], bob, "2026-07-28") as client:
            envelope = (await client.call_tool("py_inventory", {"count": 1500})).structured_content
        ref = envelope["ref"]
        bob_again = await anyio.to_thread.run_sync(lambda: token_for(rig, AUDIENCE, "bob"))
        async with as_subject(urls[2], bob_again, "2026-07-28") as client:
            counted = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
        assert counted.structured_content["rows"] == [{"n": 1500}], counted
        async with as_subject(urls[2], carol, "2026-07-28") as client:
            theirs = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
        assert theirs.is_error, theirs

    # Each instance wrote bob's login into its own folder; the store holds it sealed only.
    for name in ("a", "b", "c"):
        files = [p for p in (rig.tmp / f"state-{name}").rglob("*.json") if "clients" not in p.parts]
        assert len(files) == 1, (name, files)
    token = json.loads(files[0].read_text())["credentials"]["token_response"]["access_token"]
    shared = list((store / "logins").iterdir())
    assert len(shared) == 1, shared
    assert token.encode() not in shared[0].read_bytes() and b"bob" not in shared[0].read_bytes()


@pytest.fixture
def short_lived(tmp_path: Path) -> Iterator[Rig]:
    """The rig's defaults: access tokens live 4 s, refresh tokens rotate, and a refresh token
    used twice revokes the login (the authorization server takes it for stolen)."""
    with rig_on(tmp_path) as rig:
        yield rig


async def test_refreshes_on_several_instances_take_turns_and_keep_the_login(short_lived: Rig) -> None:
    """Three instances serve one subject's login while its access token expires every 4 s: each
    refresh is made by one instance at a time with the newest refresh token (a lock and the
    login in the store), so the rotating, reuse-revoking server never sees a token twice."""
    import browser  # noqa: PLC0415

    rig = short_lived
    store = rig.tmp / "cluster-store"
    with ExitStack() as stack:
        urls = [stack.enter_context(instance(rig, name, store)) for name in ("a", "b", "c")]
        bob = await anyio.to_thread.run_sync(lambda: token_for(rig, AUDIENCE, "bob"))
        async with as_subject(urls[0], bob) as client:
            offered = await client.call_tool(f"{SERVER}_whoami", {})
        page = offered.content[0].text.rsplit(" ", 1)[-1]
        visit = await anyio.to_thread.run_sync(lambda: browser.run(f"{page}&{urllib.parse.urlencode({'login_hint': 'bob'})}", "approve"))
        status, _, body = await anyio.to_thread.run_sync(lambda: raw_get(visit["callback"].replace("http://127.0.0.1:9", urls[2].removesuffix("/mcp"))))
        assert status == 200, body
        # Sessions held open on every instance, called in turn across several token lifetimes.
        async with as_subject(urls[0], bob) as a, as_subject(urls[1], bob) as b, as_subject(urls[2], bob) as c:
            for client in (a, b, c):
                await wait_for_tool(client, f"{SERVER}_whoami")
            answers = []
            for _ in range(4):
                for client in (a, b, c):
                    answers.append(await client.call_tool(f"{SERVER}_whoami", {}))
                await anyio.sleep(4.5)
            # All at once, after the token expired: three refreshes wanted at the same moment.
            async with anyio.create_task_group() as group:
                for client in (a, b, c):
                    async def call(client: Client = client) -> None:
                        answers.append(await client.call_tool(f"{SERVER}_whoami", {}))

                    group.start_soon(call)
        failed = [answer for answer in answers if answer.is_error or not answer.content[0].text.startswith("sub=bob ")]
        assert not failed, failed
    stats = rig.as_stats()
    print("authorization server:", stats, file=sys.stderr)
