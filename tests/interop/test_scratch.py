import pytest
from mcp_types import PromptReference
from conftest import *
pytestmark = pytest.mark.anyio
@pytest.mark.parametrize("rep", range(6))
@pytest.mark.parametrize("what", ["complete", "prompt", "tool"])
async def test_x(setup, rep, what):
    setup.use(EVERYTHING, MEMORY)
    async with connect_loom(setup, "legacy") as client:
        if what == "complete":
            r = await client.complete(PromptReference(type="ref/prompt", name=f"{EVERYTHING}_completable-prompt"), {"name": "department", "value": "E"})
            assert r.completion.values
        elif what == "prompt":
            await client.get_prompt(f"{EVERYTHING}_simple-prompt")
        else:
            r = await client.call_tool(f"{EVERYTHING}_echo", {"message": "x"})
            assert not r.is_error, r
