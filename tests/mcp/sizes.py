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

import sys
import tempfile

from daemon import Daemon, free_port
from raw import Session

STEPS = [{"id": f"s{i}", "action": "crypto.hash",
          "params": {"data": f"step {i} of ${{{{inputs.who}}}}", "algorithm": "sha256"},
          **({"depends_on": [f"s{i - 1}"]} if i > 1 else {})}
         for i in range(1, 11)]
TEN = {"name": "ten", "definition": {"steps": STEPS,
                                     "output": {"last": "${{steps.s10.output.hash}}"}},
       "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}}}


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
