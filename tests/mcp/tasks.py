"""Runs as MCP Tasks (the `io.modelcontextprotocol/tasks` extension,
spec/mcp.md "Tasks"), driven by a raw JSON-RPC client over /mcp at the
2026-07-28 revision: a task is created for `opcode.run` and for an exposed
template's tool; `tasks/get` goes working -> input_required (the
decision's options as the enum of a form) -> completed; a wrong answer is
refused and changes nothing; `tasks/update` answers, `tasks/cancel`
cancels; a failed run's task is completed with the view that says why; a kill -9 while a task waits for input loses nothing; a client
without the extension gets a plain result, and so does a 2025-11-25
session that declares it (the extension is defined at 2026-07-28).

Usage: python tasks.py PATH_TO_OPCODE
"""

import sys
import tempfile
import time

from daemon import Daemon, free_port
from raw import Session

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}

GATE = {"name": "deploy_gate", "expose": True, "description": "Build, then ask whether to ship.",
        "input_schema": {"type": "object", "properties": {"build": {"type": "string"}},
                         "required": ["build"]},
        "definition": {"steps": [
            {"id": "digest", "action": "crypto.hash", "params": {"data": "${{inputs.build}}"}},
            {"id": "approve", "type": "reasoning", "depends_on": ["digest"], "config": {
                "prompt_context": "Ship this build?",
                "options": [{"id": "ship", "description": "deploy it"},
                            {"id": "hold", "description": "keep it back"}]}},
            {"id": "done", "action": "workflow.log", "depends_on": ["approve"],
             "params": {"message": "decided"}}],
            "output": {"choice": "${{steps.approve.output.choice}}"}}}


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def run_task(client, name="opcode.run", arguments=None):
    """Starts a run as a task: the task, whose id is the workflow id."""
    arguments = arguments if arguments is not None else {"template_name": "deploy_gate",
                                                         "params": {"build": "b-7"}}
    created, _ = client.call("tools/call", {"name": name, "arguments": arguments})
    check(created.get("resultType") == "task" and created["status"] == "working",
          f"{name} did not create a task: {created}")
    # The task is the run: its id is a workflow id.
    run, _ = client.call("tools/call", {"name": "opcode.status", "arguments": {"workflow_id": created["taskId"]}})
    check(run["structuredContent"]["workflow_id"] == created["taskId"], f"task id {created}: {run}")
    return created["taskId"]


def task_until(client, task_id, status, seconds=15):
    deadline = time.time() + seconds
    while True:
        task, _ = client.call("tasks/get", {"taskId": task_id})
        if task["status"] == status:
            return task
        check(task["status"] in ("working", "input_required") and time.time() < deadline,
              f"task {task_id} is {task['status']}, waited for {status}: {task}")
        time.sleep(0.05)


def answer(client, task_id, choice, action="accept"):
    return client.request("tasks/update", {"taskId": task_id, "inputResponses": {
        "approve": {"action": action, "content": {"choice": choice, "reasoning": "tests pass"}}}})[0]


def check_question(task):
    asked = task["inputRequests"]["approve"]
    check(asked["method"] == "elicitation/create", f"input request {asked}")
    params = asked["params"]
    check(params["mode"] == "form" and "Ship this build?" in params["message"], f"question {params}")
    choice = params["requestedSchema"]["properties"]["choice"]
    check(choice["enum"] == ["ship", "hold"] and "deploy it" in choice["description"], f"choice {choice}")


def stateless(daemon):
    client = Session(f"{daemon.url}/mcp", "2026-07-28", TASKS)
    client.call("tools/call", {"name": "opcode.define", "arguments": GATE})

    task_id = run_task(client)
    task = task_until(client, task_id, "input_required")
    check_question(task)
    wrong = answer(client, task_id, "maybe")
    check("error" in wrong and "maybe" in wrong["error"]["message"], f"a wrong answer was taken: {wrong}")
    task_until(client, task_id, "input_required")
    ack = answer(client, task_id, "ship")
    check("error" not in ack, f"tasks/update: {ack}")
    done = task_until(client, task_id, "completed")
    result = done["result"]["structuredContent"]
    check(result["status"] == "completed" and result["output"] == {"choice": "ship"}, f"result {result}")
    print("ok - tasks: create, input_required with the options as an enum, a wrong answer refused, "
          "update, completed with the output")

    cancelled = run_task(client)
    task_until(client, cancelled, "input_required")
    check("error" not in client.request("tasks/cancel", {"taskId": cancelled})[0], "tasks/cancel")
    task_until(client, cancelled, "cancelled")
    declined = run_task(client)
    task_until(client, declined, "input_required")
    check("error" not in answer(client, declined, None, action="decline"), "a decline")
    skipped = task_until(client, declined, "completed")["result"]["structuredContent"]
    check(skipped["step_counts"].get("skipped", 0) >= 1, f"a declined decision: {skipped}")
    client.call("tools/call", {"name": "opcode.define", "arguments": {"name": "boom", "definition": {
        "steps": [{"id": "f", "action": "workflow.fail", "params": {"reason": "no disk"}}]}}})
    failed = task_until(client, run_task(client, arguments={"template_name": "boom"}), "completed")
    view = failed["result"]["structuredContent"]
    check(view["status"] == "failed" and view["error"]["message"] == "no disk", f"a failed run's task: {failed}")
    gone = client.request("tasks/get", {"taskId": "wf_nothing"})[0]
    check("error" in gone, f"an unknown task was found: {gone}")
    print("ok - tasks: cancel, decline, a failed run (completed, its view says why), an unknown task is an error")

    tool = run_task(client, "deploy_gate", {"build": "b-7"})
    task_until(client, tool, "input_required")
    answer(client, tool, "hold")
    check(task_until(client, tool, "completed")["result"]["structuredContent"]["output"] == {"choice": "hold"},
          "the template tool's task")
    plain = Session(f"{daemon.url}/mcp", "2026-07-28")
    listed = {t["name"] for t in plain.call("tools/list", {})[0]["tools"]}
    check("deploy_gate" in listed, f"the exposed template is not a tool: {listed}")
    ran, _ = plain.call("tools/call", {"name": "deploy_gate", "arguments": {"build": "b-8"}})
    check(ran.get("resultType", "complete") == "complete" and ran["structuredContent"]["status"] == "suspended",
          f"a client without the extension got {ran}")
    print("ok - tasks: an exposed template's tool runs as a task; without the extension it answers at once")
    queued(client)
    return client


def queued(client):
    """A run waiting for a slot of its concurrency key is a working task that
    says so; it goes on once the holder ends."""
    client.call("tools/call", {"name": "opcode.define", "arguments": {"name": "one_by_one", "definition": {
        "concurrency": {"limit": 1},
        "steps": [{"id": "hold", "type": "wait", "config": {"signal": "go"}}]}}})
    first = run_task(client, arguments={"template_name": "one_by_one"})
    second = run_task(client, arguments={"template_name": "one_by_one"})
    deadline = time.time() + 15
    while True:
        task, _ = client.call("tasks/get", {"taskId": second})
        if "queued" in task.get("statusMessage", ""):
            break
        check(time.time() < deadline, f"the waiting run's task never said it is queued: {task}")
        time.sleep(0.05)
    check(task["status"] == "working" and first in task["statusMessage"], f"a queued task: {task}")
    go = {"workflow_id": first, "signal_type": "signal", "payload": {"name": "go"}}
    client.call("tools/call", {"name": "opcode.signal", "arguments": go})
    task_until(client, first, "completed")
    # Its step waits for `go` once it holds the slot; until then the signal is refused.
    deadline = time.time() + 15
    while client.call("tools/call", {"name": "opcode.signal",
                                     "arguments": {**go, "workflow_id": second}})[0].get("isError"):
        check(time.time() < deadline, "the second run never took the slot")
        time.sleep(0.05)
    task_until(client, second, "completed")
    print("ok - tasks: a run waiting for its concurrency slot is a working task saying so, then goes on")


def after_kill(daemon, client):
    task_id = run_task(client)
    task_until(client, task_id, "input_required")
    daemon.kill()
    daemon.start()
    check_question(task_until(client, task_id, "input_required"))
    answer(client, task_id, "ship")
    check(task_until(client, task_id, "completed")["result"]["structuredContent"]["output"] == {"choice": "ship"},
          "the task after a restart")
    print("ok - tasks: a kill -9 while input_required; after the restart tasks/update completes it")


def legacy_session(daemon):
    """A 2025-11-25 session that declares the extension: the tasks
    extension is defined at 2026-07-28, so its `opcode.run` is a plain
    call, answered with the run, and nothing comes ahead of the answer."""
    client = Session(f"{daemon.url}/mcp", "2025-11-25", TASKS)
    client.open()
    messages = client.listen()
    reply, _ = client.request("tools/call", {"name": "opcode.run", "arguments": {
        "template_name": "deploy_gate", "params": {"build": "b-9"}}})
    result = reply["result"]
    check("resultType" not in result or result["resultType"] == "complete", f"a task for a 2025-11-25 call: {result}")
    run = result["structuredContent"]
    check(run["status"] == "suspended" and run["pending_decisions"][0]["id"] == "approve", f"the run: {run}")
    time.sleep(0.5)
    told = []
    while not messages.empty():
        told.append(messages.get())
    check(not any(m.get("method") == "notifications/tasks" for m in told), f"task notifications: {told}")
    print("ok - tasks: a 2025-11-25 session that declares the extension gets a plain result, no task")


def main(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port(), log=f"{home}/daemon.log")
        daemon.start()
        try:
            client = stateless(daemon)
            after_kill(daemon, client)
            legacy_session(daemon)
        finally:
            daemon.terminate()


if __name__ == "__main__":
    main(sys.argv[1])
