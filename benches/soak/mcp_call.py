"""A raw MCP tool call over a kept-alive http.client connection, at the
stateless 2026-07-28 revision: the soaks' client (cheaper per call than
an SDK, so the daemon is what is measured)."""

import json

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}


def call(connection, name, arguments):
    """The tool's result (`isError` included); a JSON-RPC error raises."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": META}})
    connection.request("POST", "/mcp", body, {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
    answer = json.loads(connection.getresponse().read())
    if "result" not in answer:
        raise RuntimeError(f"{name}: {answer}")
    return answer["result"]
