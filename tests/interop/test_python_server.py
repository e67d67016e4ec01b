"""A downstream server built with the Python SDK 2.x itself (servers/python_server.py). It also
speaks the 2026-07-28 protocol, unlike the npm servers, and it rejects requests that carry the
2026-07-28 `_meta` envelope on a connection opened with the initialize handshake."""

from __future__ import annotations

import pytest

from conftest import PY, connect, connect_loom, dump

pytestmark = pytest.mark.anyio

@pytest.fixture(autouse=True)
def _only_py(setup):
    setup.use(PY)


def _direct(setup):
    # The handshake era, like loom's own connection to it.
    return connect(setup.direct(PY), mode="legacy", loom_like=True)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_calls_prompts_and_resources_match_a_direct_connection(setup, mode):
    async with _direct(setup) as direct, connect_loom(setup, mode) as client:
        calls = [("add", {"a": 2, "b": 40}), ("weather", {"city": "Oslo"}), ("fail", {"reason": "on purpose"})]
        for name, arguments in calls:
            own = await direct.call_tool(name, arguments)
            through = await client.call_tool(f"{PY}_{name}", arguments)
            assert through.is_error == own.is_error, f"{name}: {dump(through)}"
            assert dump(through) == dump(own), name
        assert (await client.call_tool(f"{PY}_add", {"a": 2, "b": 40})).structured_content == {"result": 42}

        own_prompt = await direct.get_prompt("greet", {"name": "loom"})
        assert dump(await client.get_prompt(f"{PY}_greet", {"name": "loom"})) == dump(own_prompt)

        own_resource = await direct.read_resource("interop://python/info")
        assert dump(await client.read_resource("interop://python/info")) == dump(own_resource)
