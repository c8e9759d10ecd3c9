"""Safe, resilient actions driven through the daemon: child workflows and
fan-out (surviving a SIGKILL midway); vault secrets that never show in
plain text.

Usage: python actions.py PATH_TO_OPCODE
"""

import asyncio
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from mcp import Client

from clients import check, data
from daemon import Daemon, free_port

SQUARE = {"name": "square", "input_schema": {"type": "object", "required": ["item"],
                                             "properties": {"item": {"type": "integer"}, "offset": {"type": "integer"}}},
          "definition": {"steps": [
              {"id": "nap", "type": "wait", "config": {"duration": "150ms"}},
              {"id": "calc", "action": "expr.eval", "depends_on": ["nap"],
               "params": {"expression": "inputs.item * inputs.item + inputs.offset"}},
              {"id": "odd", "action": "workflow.fail", "depends_on": ["calc"],
               "condition": "inputs.item < 0", "params": {"reason": "negative item"}}],
              "output": {"square": "${{steps.calc.output.result}}"}}}


def fan_out(name, on_failure="fail_fast"):
    return {"name": name, "input_schema": {"type": "object", "properties": {"items": {"type": "array"}}},
            "definition": {"steps": [
                {"id": "all", "action": "workflow.map", "params": {
                    "template_name": "square", "items": "${{inputs.items}}", "params": {"offset": 1},
                    "max_concurrency": 8, "on_failure": on_failure}}],
                "output": "${{steps.all.output}}"}}


async def wait_for(client, workflow_id, seconds=60):
    deadline = time.time() + seconds
    while True:
        current = data(await client.call_tool("opcode.status", {"workflow_id": workflow_id}))
        if current["status"] in ("completed", "failed", "cancelled"):
            return current
        check(time.time() < deadline, f"{workflow_id} is still {current['status']}")
        await asyncio.sleep(0.2)


async def children(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        async with Client(f"{daemon.url}/mcp") as client:
            for template in [SQUARE, fan_out("fan"), fan_out("fan-collect", "collect"),
                             {"name": "one", "definition": {"steps": [{"id": "child", "action": "workflow.run", "params": {
                                 "template_name": "square", "params": {"item": 7, "offset": 0}}}],
                                 "output": "${{steps.child.output}}"}}]:
                data(await client.call_tool("opcode.define", template))
            one = data(await client.call_tool("opcode.run", {"template_name": "one"}))
            check(one["status"] == "completed" and one["output"]["output"] == {"square": 49}, f"workflow.run: {one}")
            kids = data(await client.call_tool("opcode.query", {
                "resource": "workflows", "filter": {"parent_workflow_id": one["workflow_id"]}}))["workflows"]
            check([k["id"] for k in kids] == [one["output"]["workflow_id"]], f"children of one: {kids}")
            print("ok - workflow.run runs a stored template as a child; the query lists it under its parent")

            mixed = data(await client.call_tool("opcode.run", {"template_name": "fan-collect",
                                                                "params": {"items": [1, -2, 3]}}))
            check(mixed["status"] == "completed", f"collect: {mixed}")
            out = mixed["output"]
            check(out["outputs"] == [{"square": 2}, None, {"square": 10}] and out["failed"] == 1, f"collect: {out}")
            failed = data(await client.call_tool("opcode.run", {"template_name": "fan",
                                                                 "params": {"items": [1, -2] + list(range(3, 30))}}))
            check(failed["status"] == "failed" and "child 1" in failed["error"]["message"], f"fail fast: {failed}")
            print("ok - workflow.map collects failures, or fails fast on the first one")

            parent = data(await client.call_tool("opcode.run", {"template_name": "fan", "wait": False,
                                                                 "params": {"items": list(range(100))}}))["workflow_id"]
            # Wait until some children ran, then kill the daemon midway.
            deadline = time.time() + 30
            while True:
                kids = data(await client.call_tool("opcode.query", {
                    "resource": "workflows", "filter": {"parent_workflow_id": parent}, "limit": 200}))["workflows"]
                done = [k for k in kids if k["status"] == "completed"]
                if len(done) >= 20:
                    break
                check(time.time() < deadline, f"children did not start: {len(kids)}")
                await asyncio.sleep(0.05)
            running = [k for k in kids if k["status"] not in ("completed", "failed")]
            check(len(running) <= 8, f"{len(running)} children ran at once under max_concurrency 8")
        daemon.kill()
        daemon.start()
        async with Client(f"{daemon.url}/mcp") as client:
            final = await wait_for(client, parent, 120)
            check(final["status"] == "completed", f"parent after restart: {final}")
            outputs = final["output"]["outputs"]
            check(outputs == [{"square": i * i + 1} for i in range(100)], f"outputs out of order: {outputs[:5]}…")
            kids = data(await client.call_tool("opcode.query", {
                "resource": "workflows", "filter": {"parent_workflow_id": parent}, "limit": 200}))["workflows"]
            check(len(kids) == 100 and all(k["status"] == "completed" for k in kids),
                  f"{len(kids)} children, statuses {set(k['status'] for k in kids)}")
        daemon.terminate()
        print("ok - 100 children under max_concurrency 8 complete in order across a SIGKILL of the daemon")


SECRET = "hunter2-\"quoted\"-s3cret"

LEAKY = {"name": "leaky", "definition": {"steps": [
    {"id": "echo", "action": "shell.exec", "params": {
        "command": "/bin/sh", "args": ["-c", "echo \"token is $TOKEN\"; echo \"$TOKEN\" >&2"],
        "env": {"TOKEN": "${{secrets.API_TOKEN}}"}}},
    {"id": "json", "action": "shell.exec", "depends_on": ["echo"], "params": {
        "command": "python3", "args": ["-c", "import json, os; print(json.dumps({'t': os.environ['TOKEN']}))"],
        "env": {"TOKEN": "${{secrets.API_TOKEN}}"}}},
    {"id": "log", "action": "workflow.log", "depends_on": ["json"],
     "params": {"message": "calling with Bearer ${{secrets.API_TOKEN}}", "token": "${{secrets.API_TOKEN}}"}},
    {"id": "emit", "action": "workflow.emit", "depends_on": ["log"],
     "params": {"event_type": "token", "payload": {"t": "${{secrets.API_TOKEN}}"}}},
    {"id": "boom", "action": "workflow.fail", "depends_on": ["emit"],
     "params": {"reason": "refused token ${{secrets.API_TOKEN}}"}}],
    "output": {"said": "${{steps.echo.output.stdout}}"}}}


async def secrets(binary):
    with tempfile.TemporaryDirectory() as home:
        env = {"OPCODE_VAULT_KEY": "correct horse battery staple"}
        db = f"{home}/opcode.db"
        subprocess.run([binary, "secret", "set", "API_TOKEN", "--db", db], input=SECRET + "\n", text=True,
                       env=dict(os.environ, **env), check=True, capture_output=True)
        listed = subprocess.run([binary, "secret", "list", "--json", "--db", db], text=True, check=True,
                                capture_output=True).stdout
        check([s["name"] for s in json.loads(listed)] == ["API_TOKEN"] and SECRET not in listed, listed)

        wrong = Daemon(binary, home, free_port(), env={"OPCODE_VAULT_KEY": "wrong"})
        try:
            wrong.start()
            check(False, "a daemon with the wrong passphrase started")
        except AssertionError as e:
            check("R0124" in str(e) and "passphrase is wrong" in str(e), f"wrong passphrase: {e}")
        print("ok - `opcode secret` seals and lists names only; a wrong passphrase stops the daemon at start")

        daemon = Daemon(binary, home, free_port(), env=env)
        daemon.start()
        results = []
        async with Client(f"{daemon.url}/mcp") as client:
            results.append(data(await client.call_tool("opcode.define", LEAKY)))
            run = data(await client.call_tool("opcode.run", {"template_name": "leaky"}))
            results.append(run)
            check(run["status"] == "failed", f"leaky: {run}")
            steps = run["steps"]
            check(steps["echo"]["output"]["stdout_raw"].startswith("token is [REDACTED]"), f"echo: {steps['echo']}")
            check(steps["echo"]["output"]["stderr"].strip() == "[REDACTED]", f"stderr: {steps['echo']}")
            check(steps["json"]["output"]["stdout"] == {"t": "[REDACTED]"}, f"json: {steps['json']}")
            check(steps["json"]["output"]["stdout_raw"].strip() == '{"t": "[REDACTED]"}', f"json: {steps['json']}")
            check("[REDACTED]" in run["error"]["message"], f"error: {run['error']}")
            for query in [{"resource": "events", "filter": {"workflow_id": run["workflow_id"]}, "limit": 1000},
                          {"resource": "workflows"}]:
                results.append(data(await client.call_tool("opcode.query", query)))
            results.append(data(await client.call_tool("opcode.status", {"workflow_id": run["workflow_id"]})))
        daemon.terminate()
        logs = daemon.process.stderr.read()
        check("[REDACTED]" in logs, "the workflow.log line is not in the daemon's log")
        leaks = [SECRET, json.dumps(SECRET)[1:-1]]
        for leak in leaks:
            check(all(leak not in json.dumps(r) and leak not in str(r) for r in results), "a secret in an MCP result")
            check(leak not in logs, "a secret in the daemon's log")
            for path in glob.glob(f"{home}/opcode.db*"):
                with open(path, "rb") as f:
                    check(leak.encode() not in f.read(), f"a secret in {path}")
        print("ok - secrets are masked in outputs, errors, events, logs and MCP results; never stored in plain text")


async def main(binary):
    await secrets(binary)
    await children(binary)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
