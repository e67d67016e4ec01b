"""A small MCP stdio server built with the Python SDK (2.x) itself, to run behind loom.

Unlike the npm servers (TypeScript SDK 1.x, handshake era only), this one also speaks the
2026-07-28 protocol, so it shows how loom treats a downstream server of the newer era.
"""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

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


@app.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(reason)


@app.prompt()
def greet(name: str) -> str:
    """A greeting for someone."""
    return f"Hello, {name}!"


@app.resource("interop://python/info", mime_type="text/plain")
def info() -> str:
    """A fixed text resource."""
    return "served by the Python SDK"


if __name__ == "__main__":
    app.run()
