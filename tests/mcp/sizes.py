"""What an agent's context pays for: the byte sizes of `opcode.run` and
`opcode.status` on a 10-step linear workflow, as text content and on the
wire (the whole JSON-RPC response body), over /mcp with a raw JSON-RPC
client, in a 2025-11-25 session and at the stateless 2026-07-28 revision
(where the text is a headline beside `structuredContent`).

Usage: python sizes.py PATH_TO_OPCODE [--check]
With --check it fails unless the defaults meet spec/mcp.md's budgets
(run <= 600 B, status <= 1 KB of text); tests/mcp/run calls it so.
Results go in benches/README.md.
"""

import json
import sys
import tempfile
import urllib.request

from daemon import Daemon, free_port

STEPS = [{"id": f"s{i}", "action": "crypto.hash",
          "params": {"data": f"step {i} of ${{{{inputs.who}}}}", "algorithm": "sha256"},
          **({"depends_on": [f"s{i - 1}"]} if i > 1 else {})}
         for i in range(1, 11)]
TEN = {"name": "ten", "definition": {"steps": STEPS,
                                     "output": {"last": "${{steps.s10.output.hash}}"}},
       "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}}}


class Session:
    """A Streamable HTTP client at `revision`, answering each call with its
    raw body (a session of its own before 2026-07-28)."""

    def __init__(self, url, revision="2025-11-25"):
        self.url, self.revision, self.session, self.next_id = url, revision, None, 0

    def post(self, message):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": self.revision}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.revision >= "2026-07-28":
            # SEP-2243: the method and the tool's name ride in headers too.
            headers["Mcp-Method"] = message["method"]
            if message["method"] == "tools/call":
                headers["Mcp-Name"] = message["params"]["name"]
        request = urllib.request.Request(self.url, json.dumps(message).encode(), headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            self.session = response.headers.get("Mcp-Session-Id", self.session)
            body = response.read().decode()
        if not body:
            return None, 0
        # An SSE body: the JSON-RPC message is the `data:` of the event.
        payload = "".join(line[5:].strip() for line in body.splitlines() if line.startswith("data:")
                          and line[5:].strip()) if not body.lstrip().startswith("{") else body
        return json.loads(payload), len(payload.encode())

    def call(self, method, params):
        if self.revision >= "2026-07-28":
            params = dict(params, _meta={
                "io.modelcontextprotocol/protocolVersion": self.revision,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "sizes", "version": "1"}})
        self.next_id += 1
        reply, size = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return reply["result"], size

    def open(self):
        if self.revision >= "2026-07-28":
            return
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "sizes", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def tool(session, name, arguments):
    result, wire = session.call("tools/call", {"name": name, "arguments": arguments})
    if result.get("isError"):
        raise AssertionError(f"{name}: {result}")
    text = sum(len(block["text"].encode()) for block in result["content"] if block["type"] == "text")
    return result, text, wire


def measure(url, revision):
    session = Session(url, revision)
    session.open()
    tool(session, "opcode.define", TEN)
    run, run_text, run_wire = tool(session, "opcode.run",
                                   {"template_name": "ten", "params": {"who": "sizes"}})
    workflow_id = run["structuredContent"]["workflow_id"]
    _, status_text, status_wire = tool(session, "opcode.status", {"workflow_id": workflow_id})
    print(f"10-step linear workflow at {revision}: opcode.run text {run_text} B, wire {run_wire} B; "
          f"opcode.status text {status_text} B, wire {status_wire} B")
    return run_text, status_text


def main(binary, check):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            sizes = [measure(f"{daemon.url}/mcp", revision) for revision in ("2025-11-25", "2026-07-28")]
        finally:
            daemon.terminate()
    if check and any(run > 600 or status > 1024 for run, status in sizes):
        raise AssertionError("over the budget of spec/mcp.md: run <= 600 B, status <= 1 KB")


if __name__ == "__main__":
    main(sys.argv[1], "--check" in sys.argv[2:])
