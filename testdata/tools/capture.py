"""Capture the real `tools/list` of the downstream MCP servers used by the tool-search tests.

Runs each server over stdio with the official `mcp` client SDK, pages through `tools/list`, and
writes `testdata/tools/<server>.json`: the list of tool definitions exactly as the server sent
them (every field). Also prints, per server, the tool count and the
characters of the stored JSON and of the full tool definitions (outputSchema and _meta included),
which is what a client would pay to see them all.

Usage (from the crate's root; CAPTURE_ROOT=<dir> if node/, venv/ and venv-sqlite/ are elsewhere):
    venv/bin/python testdata/tools/capture.py            # all servers
    venv/bin/python testdata/tools/capture.py git time   # some of them

Needs: venv with `mcp` and the first three PyPI servers, venv-<prefix> for each later PyPI server
(each pins its own `mcp`), node/node_modules with the npm servers (see testdata/tools/README.md
for the pinned versions and install commands).
"""

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

OUT = Path(__file__).resolve().parent
# Where the servers were installed (see README.md); by default beside the crate's root.
ROOT = Path(os.environ.get("CAPTURE_ROOT", OUT.parent.parent))
NODE = ROOT / "node" / "node_modules" / "@modelcontextprotocol"
VENV_BIN = ROOT / "venv" / "bin"

# A throwaway directory/database/repository so that no server touches anything real.
SCRATCH = Path(tempfile.mkdtemp(prefix="loom-capture-"))


def servers() -> dict[str, StdioServerParameters]:
    def npm(package: str, *args: str) -> StdioServerParameters:
        return StdioServerParameters(command="node", args=[str(NODE / package / "dist" / "index.js"), *args])

    def pypi(script: str, *args: str) -> StdioServerParameters:
        return StdioServerParameters(command=str(VENV_BIN / script), args=list(args))

    # The servers added later (2026-12) run with a scratch HOME and only the variables named here,
    # so nothing of the capturing machine's (a token, a config file) changes what they list.
    # Servers that refuse to start without a credential get an obvious dummy: listing tools never
    # calls their service.
    def quiet_env(**extra: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(SCRATCH), **extra}

    def npm_entry(package: str, entry: str, *args: str, **env: str) -> StdioServerParameters:
        return StdioServerParameters(
            command="node", args=[str(ROOT / "node" / "node_modules" / package / entry), *args], env=quiet_env(**env)
        )

    def own_venv(prefix: str, script: str, *args: str, **env: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=str(ROOT / f"venv-{prefix}" / "bin" / script), args=list(args), env=quiet_env(**env)
        )

    return {
        "everything": npm("server-everything", "stdio"),
        "filesystem": npm("server-filesystem", str(SCRATCH)),
        "memory": StdioServerParameters(
            command="node",
            args=[str(NODE / "server-memory" / "dist" / "index.js")],
            env={"MEMORY_FILE_PATH": str(SCRATCH / "memory.jsonl"), "PATH": "/usr/bin:/bin"},
        ),
        # The postgres server connects lazily (a pool), so listing tools needs no database.
        "postgres": npm("server-postgres", "postgresql://127.0.0.1:1/none"),
        "git": pypi("mcp-server-git"),
        "time": pypi("mcp-server-time", "--local-timezone", "UTC"),
        "fetch": pypi("mcp-server-fetch"),
        # mcp-server-sqlite (last release 2025.4.25) breaks under the 2.x SDK, so it lives in a venv
        # of its own with mcp<2; the client side stays on 2.x.
        "sqlite": StdioServerParameters(
            command=str(ROOT / "venv-sqlite" / "bin" / "mcp-server-sqlite"),
            args=["--db-path", str(SCRATCH / "capture.db")],
        ),
        # Added 2026-12 (issue 35: more servers to measure search on).
        "github": npm_entry("@modelcontextprotocol/server-github", "dist/index.js"),
        "playwright": npm_entry("@playwright/mcp", "cli.js"),
        "notion": npm_entry("@notionhq/notion-mcp-server", "bin/cli.mjs"),
        "slack": npm_entry(
            "@modelcontextprotocol/server-slack", "dist/index.js", SLACK_BOT_TOKEN="xoxb-dummy", SLACK_TEAM_ID="T0"
        ),
        "maps": npm_entry("@modelcontextprotocol/server-google-maps", "dist/index.js", GOOGLE_MAPS_API_KEY="dummy"),
        "brave": npm_entry("@brave/brave-search-mcp-server", "dist/index.js", BRAVE_API_KEY="dummy"),
        "thinking": npm_entry("@modelcontextprotocol/server-sequential-thinking", "dist/index.js"),
        "context7": npm_entry("@upstash/context7-mcp", "dist/index.js"),
        "kubernetes": npm_entry("mcp-server-kubernetes", "dist/index.js"),
        "firecrawl": npm_entry("firecrawl-mcp", "dist/index.js"),
        "awsdocs": own_venv("awsdocs", "awslabs.aws-documentation-mcp-server"),
        "excel": own_venv("excel", "excel-mcp-server", "stdio"),
        "arxiv": own_venv("arxiv", "arxiv-mcp-server", ARXIV_STORAGE_PATH=str(SCRATCH / "arxiv")),
        "obsidian": own_venv("obsidian", "mcp-obsidian", OBSIDIAN_API_KEY="dummy"),
    }


async def capture(name: str, params: StdioServerParameters) -> tuple[str, str, list[dict], int]:
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools: list[dict] = []
            cursor = None
            while True:
                page = await session.list_tools(params={"cursor": cursor} if cursor else None)
                tools.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
    full_chars = len(json.dumps(tools, ensure_ascii=False))
    stored = tools  # every field, as sent: what a client pays for
    info = init.server_info
    return info.name, info.version, stored, full_chars


async def main(wanted: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    table = servers()
    unknown = [w for w in wanted if w not in table]
    if unknown:
        sys.exit(f"unknown server(s) {unknown}; known: {sorted(table)}")
    total_tools = total_stored = total_full = 0
    print(f"{'server':<11} {'reported as':<34} {'tools':>5} {'stored chars':>12} {'full chars':>10}")
    for name in wanted or list(table):
        info_name, info_version, tools, full_chars = await capture(name, table[name])
        text = json.dumps(tools, indent=2, ensure_ascii=False) + "\n"
        (OUT / f"{name}.json").write_text(text, encoding="utf-8")
        compact = len(json.dumps(tools, ensure_ascii=False))
        total_tools += len(tools)
        total_stored += compact
        total_full += full_chars
        print(f"{name:<11} {info_name + ' ' + info_version:<34} {len(tools):>5} {compact:>12} {full_chars:>10}")
    print(f"{'total':<11} {'':<34} {total_tools:>5} {total_stored:>12} {total_full:>10}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
