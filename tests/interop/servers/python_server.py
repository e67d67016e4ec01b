"""A small MCP stdio server built with the Python SDK (2.x) itself, to run behind loom.

Unlike the npm servers (TypeScript SDK 1.x, handshake era only), this one also speaks the
2026-07-28 protocol, so it shows how loom treats a downstream server of the newer era.

    python_server.py                              stdio
    python_server.py --http PORT                  Streamable HTTP at http://127.0.0.1:PORT/mcp
    python_server.py --http PORT --bearer TOKEN   the same, answering 401 to any request without
                                                  `Authorization: Bearer TOKEN`
"""

import argparse
import hmac
import os
import sys
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

# Beside this file, found also when a test runs it through runpy (sys.path[0] is then the test's).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from meta_seen import meta_seen  # noqa: E402

app = MCPServer("interop-python")


class Weather(BaseModel):
    temperature: float = Field(description="Temperature in celsius")
    conditions: str


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool(title="Weather")
def weather(city: str) -> Weather:
    """Made-up weather for a city, as structured content."""
    return Weather(temperature=21.5, conditions=f"sunny in {city}")


class StockItem(BaseModel):
    sku: str
    name: str
    quantity: int
    price: float
    warehouse: str


class Inventory(BaseModel):
    total: int = Field(description="Number of items")
    items: list[StockItem]


WAREHOUSES = ["north", "south", "east", "west"]


@app.tool(title="Inventory", annotations=ToolAnnotations(read_only_hint=True))
def inventory(count: int) -> Inventory:
    """`count` made-up stock items, as structured content (the tool has an outputSchema)."""
    items = [
        StockItem(
            sku=f"SKU-{i:05d}",
            name=f"item {i}",
            quantity=(i * 7) % 100,
            price=round(1.25 + i % 50, 2),
            warehouse=WAREHOUSES[i % len(WAREHOUSES)],
        )
        for i in range(count)
    ]
    return Inventory(total=count, items=items)


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def sales_report(weeks: int) -> str:
    """A markdown report: a heading line and a GFM table of `weeks` weekly sales rows."""
    lines = ["Weekly sales:", "", "| week | region | orders | revenue |", "|---:|---|---:|---:|"]
    for week in range(1, weeks + 1):
        region = WAREHOUSES[week % len(WAREHOUSES)]
        lines.append(f"| {week} | {region} | {week * 3 % 97} | {week * 12.5:.2f} |")
    return "\n".join(lines) + "\n"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def build_log(lines: int) -> str:
    """A build log of `lines` INFO lines, an ERROR on line 3 and a SUMMARY line last (the SDK
    sends the text twice: as a text block and as `{"result": text}` structuredContent)."""
    out = [f"12:{n // 60 % 60:02d}:{n % 60:02d} INFO step {n} done" for n in range(1, lines + 1)]
    if lines >= 3:
        out[2] = "12:00:03 ERROR compiler: cannot find module `db` (first failure)"
    return "\n".join(out) + f"\nSUMMARY: {lines} steps, 1 error"


def big_text_of(size: int) -> str:
    """The text `big_text` answers: `size` characters of numbered prose lines (no table, no JSON),
    rebuilt by the tests to compare."""
    line = "{:08d} the quick brown fox jumps over the lazy dog; nothing here is a table.\n"
    count = size // len(line.format(0)) + 1
    return "".join(line.format(n) for n in range(count))[:size]


@app.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def big_text(size: int) -> str:
    """`size` characters of plain text as one text block (no structuredContent copy)."""
    return big_text_of(size)


@app.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(reason)


@app.tool()
async def sleepy(seconds: float) -> str:
    """Sleeps `seconds`, then answers. A call cancelled before that is recorded as a line in the
    file INTEROP_CANCELLED_FILE names (when set): what the server saw of the client's cancel."""
    finished = False
    try:
        await anyio.sleep(seconds)
        finished = True
        return f"slept {seconds} s"
    finally:
        if not finished and (record := os.environ.get("INTEROP_CANCELLED_FILE")):
            with open(record, "a") as out:
                out.write("cancelled\n")


@app.tool()
def query(sql: str) -> str:
    """Runs nothing: answers any SQL with a JSON-RPC error, as a database server does on bad SQL
    (code -32602, the statement and a position in `data`)."""
    raise MCPError(code=-32602, message=f'syntax error at or near "{sql.split()[0] if sql.split() else sql}"', data={"sql": sql, "position": 1})


# Tools that ask the client for input. The SDK asks the way the connection's era has it: with
# server-to-client requests (elicitation/create, sampling/createMessage, roots/list) on a session
# opened with `initialize`, with an `input_required` result on a 2026-07-28 connection.


class Person(BaseModel):
    name: str


def ask_name() -> Elicit[Person]:
    return Elicit("Who is asking?", Person)


def ask_model(topic: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(text=f"one word about {topic}"))], max_tokens=20)


def ask_roots() -> ListRoots:
    return ListRoots()


@app.tool()
async def whoami(person: Annotated[Person, Resolve(ask_name)]) -> str:
    """Asks the user for a name (elicitation) and greets them."""
    return f"Hello, {person.name}"


@app.tool()
async def survey(
    topic: str,
    person: Annotated[Person, Resolve(ask_name)],
    said: Annotated[CreateMessageResult, Resolve(ask_model)],
    roots: Annotated[ListRootsResult, Resolve(ask_roots)],
) -> str:
    """Asks for a name, a model's word on `topic` and the client's roots, and reports all three."""
    text = said.content.text if isinstance(said.content, TextContent) else "?"
    return f"{person.name}|{text}|{','.join(str(root.uri) for root in roots.roots)}"


@app.tool()
async def chatty(ctx: Context) -> str:
    """Logs one line at info and one at debug, reports progress, then answers."""
    await ctx.info("info-line")
    await ctx.debug("debug-line")
    await ctx.report_progress(1, 2, "half")
    return "ok"


@app.tool()
async def echo_meta(ctx: Context) -> str:
    """The request's `_meta` as the server got it, as JSON (without the progress token and the
    2026-07-28 envelope, which belong to the connection)."""
    return meta_seen(ctx.request_context.meta)


@app.prompt()
def greet(name: str) -> str:
    """A greeting for someone."""
    return f"Hello, {name}!"


@app.resource("interop://python/info", mime_type="text/plain")
def info() -> str:
    """A fixed text resource."""
    return "served by the Python SDK"


class RequireBearer:
    """ASGI middleware: HTTP requests without `Authorization: Bearer <token>` get a 401, the way
    a hosted MCP server refuses a missing or wrong token (lifespan events pass through)."""

    def __init__(self, inner, token: str) -> None:
        self.inner = inner
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "invalid_token", "error_description": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer error="invalid_token"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.inner(scope, receive, send)


def serve_http(port: int, bearer: str | None) -> None:
    import uvicorn

    http_app = app.streamable_http_app(host="127.0.0.1")
    uvicorn.run(
        RequireBearer(http_app, bearer) if bearer else http_app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--bearer", metavar="TOKEN", help="with --http: require `Authorization: Bearer TOKEN`")
    options = parser.parse_args()
    if options.http is None:
        app.run()
    else:
        serve_http(options.http, options.bearer)
