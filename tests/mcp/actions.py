"""Safe, resilient actions driven through the daemon: child workflows and
fan-out (surviving a SIGKILL midway).

Usage: python actions.py PATH_TO_OPCODE
"""

import asyncio
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


async def main(binary):
    await children(binary)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
