"""The Python SDK's own conformance server (`examples/servers/everything-server` of the `mcp`
sdist, which .ci/setup-interop unpacks), served on stdio for loom, or on HTTP for the suite
directly.

The MCP conformance suite calls the server's tools and prompts by their names (`test_simple_text`,
`test_simple_prompt`, ...). loom exposes every tool as `<server>_<tool>`, so on stdio (for loom)
the `test_` prefix is taken off each name: behind loom as server `test`, they keep the names the
suite calls. Nothing else is changed. `--as-is` keeps the names on stdio too, for the suite
reaching the server through a stdio bridge without loom (tests/interop/test_conformance.py).

    conformance_server.py EXAMPLE_DIR                 stdio, names without `test_` (behind loom)
    conformance_server.py EXAMPLE_DIR --as-is         stdio, names as they are
    conformance_server.py EXAMPLE_DIR --http PORT     Streamable HTTP at /mcp, names as they are
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("example", help="the everything-server example folder of the mcp sdist")
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--as-is", action="store_true", help="on stdio, keep the `test_` names")
    options = parser.parse_args()
    sys.path.insert(0, options.example)
    from mcp_everything_server.server import mcp  # noqa: PLC0415 (found through the path above)

    if options.http is not None:
        mcp.run(transport="streamable-http", port=options.http)
        return
    if options.as_is:
        mcp.run()
        return
    # The SDK version is pinned (tests/interop/constraints.txt): its managers keep tools and
    # prompts in a dict by name.
    for registry in (mcp._tool_manager._tools, mcp._prompt_manager._prompts):  # noqa: SLF001
        for name in [n for n in registry if n.startswith("test_")]:
            entry = registry.pop(name)
            entry.name = name.removeprefix("test_")
            registry[entry.name] = entry
    mcp.run()


if __name__ == "__main__":
    main()
