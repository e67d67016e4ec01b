"""server-filesystem, rooted at a temp dir, used through loom. Its tools declare an outputSchema
({content: string}), so the SDK validates every successful result against it."""

from __future__ import annotations

import pytest

from conftest import (
    FS,
    PASSTHROUGH_MODES,
    assert_matches_output_schema,
    connect_direct,
    connect_loom,
    dump,
    output_schema,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _only_fs(setup):
    setup.use(FS)


def _text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def _schemas(client) -> dict[str, dict | None]:
    """Each tool's outputSchema as loom lists it (SPEC §5.3: maybe under `_meta`)."""
    return {tool.name: output_schema(tool) for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_list_and_read_match_a_direct_call(setup, mode):
    root = setup.fs_root
    calls = [
        ("list_allowed_directories", {}),
        ("list_directory", {"path": str(root)}),
        ("read_text_file", {"path": str(root / "hello.txt")}),
        ("read_text_file", {"path": str(root / "hello.txt"), "head": 1}),
        ("get_file_info", {"path": str(root / "docs" / "note.md")}),
    ]
    async with connect_direct(setup, FS) as direct, connect_loom(setup, mode) as client:
        schemas = await _schemas(client)
        for name, arguments in calls:
            schema = schemas[f"{FS}_{name}"]
            assert schema is not None, f"{name} has no outputSchema through loom"
            own = await direct.call_tool(name, arguments)
            through = await client.call_tool(f"{FS}_{name}", arguments)
            assert not through.is_error, _text(through)
            assert_matches_output_schema(through, schema)
            if name != "get_file_info":  # it reports access times, which the direct call changed
                assert dump(through) == dump(own), name

        listing = await client.call_tool(f"{FS}_list_directory", {"path": str(root)})
        assert set(_text(listing).splitlines()) == {"[FILE] hello.txt", "[DIR] docs"}
        assert listing.structured_content == {"content": _text(listing)}

        read = await client.call_tool(f"{FS}_read_text_file", {"path": str(root / "hello.txt")})
        assert _text(read) == (root / "hello.txt").read_text()
        assert read.structured_content == {"content": (root / "hello.txt").read_text()}


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_write_then_read_back(setup, mode):
    target = setup.fs_root / "docs" / "written.txt"
    content = "written through loom\nline two: ünïcödé ✓\n"
    async with connect_loom(setup, mode) as client:
        schemas = await _schemas(client)
        wrote = await client.call_tool(f"{FS}_write_file", {"path": str(target), "content": content})
        assert not wrote.is_error, _text(wrote)
        assert_matches_output_schema(wrote, schemas[f"{FS}_write_file"])
        assert target.read_text() == content

        read = await client.call_tool(f"{FS}_read_text_file", {"path": str(target)})
        assert read.structured_content == {"content": content}
        assert_matches_output_schema(read, schemas[f"{FS}_read_text_file"])

        listing = await client.call_tool(f"{FS}_list_directory", {"path": str(target.parent)})
        assert "[FILE] written.txt" in _text(listing).splitlines()


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_access_outside_the_root_is_refused(setup, mode):
    outside = setup.tmp / "outside.txt"
    outside.write_text("secret")
    async with connect_loom(setup, mode) as client:
        result = await client.call_tool(f"{FS}_read_text_file", {"path": str(outside)})
    assert result.is_error
    assert "secret" not in _text(result)
    assert "outside allowed directories" in _text(result) or "denied" in _text(result).lower()
