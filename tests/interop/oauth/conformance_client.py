#!/usr/bin/env python3
"""loom as the client of the MCP conformance suite's auth scenarios (`conformance client
--command "conformance_client.py" --scenario auth/…`): the suite appends its server's URL and
names the scenario in MCP_CONFORMANCE_SCENARIO (MCP_CONFORMANCE_CONTEXT: a pre-registered
client's id and secret, when the scenario has one).

What a person does with loom, end to end:
1. a config with the suite's server as the remote server `s` (its `oauth` from the context; the
   client metadata document URL the suite's own clients use, for the CIMD scenario);
2. `loom auth login s`, with browser.py as `$BROWSER` (the suite's authorization endpoint
   redirects at once, so browser.py only follows the redirect to loom's loopback callback);
3. the official Python SDK client over stdio to `loom --config …`: list the tools, call
   `s_test-tool`. A call that needs a login again (a step-up) is offered through URL
   elicitation: browser.py opens the page, and the call is made again, at most twice.

Env: LOOM_BIN (the loom binary). Exit 0 when the call succeeded; the suite judges the rest from
what reached its servers.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BROWSER = HERE / "browser.py"
# The URL the suite's reference clients give as their client metadata document (CIMD).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def config_for(url: str, context: dict[str, Any]) -> dict[str, Any]:
    oauth: dict[str, Any] = {"clientMetadataUrl": CLIENT_METADATA_URL}
    if context.get("client_id"):
        oauth["clientId"] = context["client_id"]
    if context.get("client_secret"):
        oauth["clientSecret"] = context["client_secret"]
    return {"servers": [{"name": "s", "url": url, "oauth": oauth, "protocol": os.environ.get("LOOM_CONFORMANCE_PROTOCOL", "auto")}]}


async def use(loom: str, config: Path, env: dict[str, str]) -> int:
    import mcp_types as types
    from mcp import Client, StdioServerParameters

    async def person(context: Any, params: Any) -> types.ElicitResult:
        subprocess.run([sys.executable, str(BROWSER), params.url], env={**env, "LOOM_TEST_BROWSER_FOREGROUND": "1"}, timeout=60)
        return types.ElicitResult(action="accept")

    params = StdioServerParameters(command=loom, args=["--config", str(config)], env=env)
    async with Client(params, mode="legacy", read_timeout_seconds=60, elicitation_callback=person) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        print(f"tools: {tools}", file=sys.stderr)
        for _ in range(3):
            result = await client.call_tool("s_test-tool", {})
            text = " ".join(getattr(block, "text", "") for block in result.content)
            print(f"call: error={result.is_error} {text[:300]}", file=sys.stderr)
            if not result.is_error:
                return 0
            if "logged in to" not in text and "under way" not in text:
                return 1
            # Logged in again (a step-up): the server's connection comes back, then the call.
            for _ in range(100):
                if "s_test-tool" in {tool.name for tool in (await client.list_tools()).tools}:
                    break
                await asyncio.sleep(0.1)
    return 1


def main() -> int:
    url = sys.argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    loom = os.environ["LOOM_BIN"]
    work = Path(tempfile.mkdtemp(prefix="loom-conformance-client-"))
    config = work / "config.json"
    config.write_text(json.dumps(config_for(url, context)))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work),
        "XDG_STATE_HOME": str(work / "state"),
        "BROWSER": str(BROWSER),
        "LOOM_TEST_BROWSER_FOREGROUND": "1",
        "LOOM_LOG": os.environ.get("LOOM_LOG", "info"),
    }
    login = subprocess.run([loom, "auth", "login", "s", "--config", str(config)], env=env, capture_output=True, text=True, timeout=120)
    print(f"login: exit {login.returncode}\n{login.stderr[-3000:]}", file=sys.stderr)
    if login.returncode != 0:
        return 1
    return asyncio.run(use(loom, config, env))


if __name__ == "__main__":
    sys.exit(main())
