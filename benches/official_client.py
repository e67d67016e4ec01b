"""The hop as the official Python client sees it: `echo` through server-everything, directly,
through a bare relay and through loom, in each of the SDK's modes (issue 26).

Run by `cargo bench --bench passthrough` when .ci/venv and .ci/node exist (after
.ci/setup-interop); by hand:

    .ci/venv/bin/python benches/official_client.py --loom target/release/loom \
        --relay target/release/deps/passthrough-HASH --everything .ci/node/node_modules/...

For each side: `--warmup` calls, then `--rounds` rounds of `--calls` sequential calls; the round
with the lowest median is reported (p50 and p99 of that round), and what the relay and loom add
to the direct p50. The relay is the passthrough bench binary itself with LOOM_BENCH_RELAY set (it
copies lines both ways and parses nothing). server-everything speaks no 2026-07-28, so for that
mode the direct side is the SDK's `auto` (as a user connected directly would have it); the relay
carries each mode as it comes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters


def params(command: str, args: list[str], env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=command, args=args, env={"PATH": os.environ.get("PATH", ""), **(env or {})})


async def measure(server: StdioServerParameters, mode: str, tool: str, warmup: int, rounds: int, calls: int) -> tuple[float, float]:
    """The (p50, p99) in microseconds of the round with the lowest median."""
    async with Client(server, mode=mode, cache=None, read_timeout_seconds=60) as client:
        await client.list_tools()
        for _ in range(warmup):
            await client.call_tool(tool, {"message": "ping"})
        best: tuple[float, float] | None = None
        for _ in range(rounds):
            samples = []
            for _ in range(calls):
                started = time.perf_counter()
                await client.call_tool(tool, {"message": "ping"})
                samples.append((time.perf_counter() - started) * 1e6)
            samples.sort()
            p50 = samples[len(samples) // 2]
            p99 = samples[min(len(samples) - 1, round((len(samples) - 1) * 0.99))]
            if best is None or p50 < best[0]:
                best = (p50, p99)
        assert best is not None
        return best


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--relay", required=True, help="the passthrough bench binary (relay mode)")
    parser.add_argument("--everything", required=True, help="server-everything's dist/index.js")
    parser.add_argument("--modes", default="auto,2026-07-28,legacy")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=100)
    options = parser.parse_args()

    node = ["node", options.everything]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "loom.config.json"
        config.write_text(json.dumps({"servers": [{"name": "everything", "command": node[0], "args": node[1:]}], "report": {"enabled": False}}))
        direct = params(node[0], node[1:])
        relay = params(options.relay, node, {"LOOM_BENCH_RELAY": "1"})
        loom = params(options.loom, ["--config", str(config)], {"LOOM_LOG": "error"})
        print(f"official client (Python SDK), echo through server-everything: best of {options.rounds} rounds x {options.calls} calls after {options.warmup}; microseconds")
        print(f"  {'mode':<11} {'direct p50':>10} {'p99':>8} {'relay +p50':>10} {'+p99':>8} {'loom +p50':>10} {'+p99':>8} {'loom/relay':>10}")
        for mode in options.modes.split(","):
            own = await measure(direct, "auto" if mode == "2026-07-28" else mode, "echo", options.warmup, options.rounds, options.calls)
            relayed = await measure(relay, "auto" if mode == "2026-07-28" else mode, "echo", options.warmup, options.rounds, options.calls)
            through = await measure(loom, mode, "everything_echo", options.warmup, options.rounds, options.calls)
            relay_add = (relayed[0] - own[0], relayed[1] - own[1])
            loom_add = (through[0] - own[0], through[1] - own[1])
            ratio = loom_add[0] / relay_add[0] if relay_add[0] > 0 else float("inf")
            print(
                f"  {mode:<11} {own[0]:10.1f} {own[1]:8.1f} {relay_add[0]:+10.1f} {relay_add[1]:+8.1f} "
                f"{loom_add[0]:+10.1f} {loom_add[1]:+8.1f} {ratio:10.2f}",
                flush=True,
            )


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
