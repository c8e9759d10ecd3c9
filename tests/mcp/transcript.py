"""An agent-shaped transcript and what it costs in context: the
conversation of the skill (editors/skill/opcode/SKILL.md: define, run,
the decision, the result) run against a daemon in a 2025-11-25 session,
each tool result's text measured in bytes and estimated in tokens (4 bytes
a token), beside the same conversation in opcode's shapes (its skill's:
`opcode.run` and `opcode.status` carry every step with its output and the
status its events, and the decision is only seen through `opcode.status`),
reproduced with `include`. Prints the Markdown table of spec/mcp.md.

Usage: python transcript.py PATH_TO_OPCODE
"""

import json
import os
import sys
import tempfile

from daemon import Daemon, free_port
from raw import Session

SKILL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../editors/skill/opcode/SKILL.md")


def conversation():
    """The skill's tool-call blocks, in order: (tool, arguments)."""
    calls, lines = [], iter(open(SKILL).read().splitlines())
    for line in lines:
        if line.startswith("```json opcode."):
            body = []
            for inner in lines:
                if inner == "```":
                    break
                body.append(inner)
            calls.append((line[len("```json "):], json.loads("\n".join(body))))
    return calls


def text_of(result):
    return sum(len(block["text"].encode()) for block in result["content"] if block["type"] == "text")


def play(session, shapes):
    """Runs the conversation; `shapes` "opcode" asks for what opcode always
    answers. Returns [(tool, bytes)]."""
    measured, workflow_id = [], ""
    for tool, args in conversation():
        args = json.loads(json.dumps(args).replace("WORKFLOW_ID", workflow_id))
        if shapes == "opcode" and tool != "opcode.define":
            args["include"] = ["outputs", "events"] if tool == "opcode.status" else ["outputs"]
        if shapes == "opcode" and tool == "opcode.define":
            args["name"] += "_opcode"
        if shapes == "opcode" and tool == "opcode.run":
            args["template_name"] += "_opcode"
        result, _ = session.call("tools/call", {"name": tool, "arguments": args})
        workflow_id = result["structuredContent"].get("workflow_id", workflow_id)
        measured.append((tool, text_of(result)))
        if shapes == "opcode" and tool == "opcode.run":
            # opcode.run shows no decision: the agent reads opcode.status.
            status, _ = session.call("tools/call", {"name": "opcode.status", "arguments": {
                "workflow_id": workflow_id, "include": ["outputs", "events"]}})
            measured.append(("opcode.status", text_of(status)))
    return measured


def main(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            session = Session(f"{daemon.url}/mcp")
            session.open()
            ours, theirs = play(session, "opcode-rs"), play(session, "opcode")
        finally:
            daemon.terminate()
    print("| call | opcode-rs | in opcode's shapes |")
    print("|---|---|---|")
    rows = max(len(ours), len(theirs))
    for i in range(rows):
        cell = lambda m: f"`{m[i][0]}` {m[i][1]:,} B (~{m[i][1] // 4} tokens)" if i < len(m) else ""
        print(f"| {i + 1} | {cell(ours)} | {cell(theirs)} |")
    total = lambda m: sum(size for _, size in m)
    print(f"| total | {total(ours):,} B (~{total(ours) // 4} tokens) | "
          f"{total(theirs):,} B (~{total(theirs) // 4} tokens) |")


if __name__ == "__main__":
    main(sys.argv[1])
