"""A small MCP server written with the official MCP Python SDK (PyPI `mcp`),
served over stdio: the MCP server behind `a2a serve --agent mcp` in the
interop tests (crates/agentwire-cli/tests/mcp_agent.rs).

Tools: reverse(text), add(a, b), weather(city, unit).
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("Python toolbox", instructions="Small tools for the interop tests.")


@server.tool()
def reverse(text: str) -> str:
    """Reverses the text, letter by letter."""
    return text[::-1]


@server.tool()
def add(a: float, b: float) -> str:
    """Adds two numbers a and b."""
    s = a + b
    return str(int(s)) if s == int(s) else str(s)


@server.tool()
def weather(city: str, unit: str) -> str:
    """Tells the (made up) weather of a city, in celsius or fahrenheit."""
    return f"Sunny in {city}, 21 degrees {unit}"


if __name__ == "__main__":
    server.run("stdio")
