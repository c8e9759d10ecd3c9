"""Decisions asked as form elicitations (setting `elicit_decisions`,
spec/mcp.md), with the official Python SDK in a 2025-11-25 session: a run
that waits for its agent's decision asks that agent's session with
`elicitation/create` (the options as the enum of `choice`), and the answer
resolves it as `opcode.signal` would. A dismissed form leaves the decision
pending; after a kill -9 and a restart, the agent's next session is asked
again and its answer completes the run.

Usage: python elicit.py PATH_TO_OPCODE
"""

import asyncio
import sys
import tempfile

import mcp_types as types
from mcp import Client
from mcp.client.sse import sse_client

from clients import check, data, wait_for
from daemon import Daemon, free_port

GATE = {"name": "gate", "agent_id": "lead", "definition": {"steps": [
    {"id": "approve", "type": "reasoning", "config": {
        "prompt_context": "Merge the release branch?",
        "options": [{"id": "merge", "description": "merge it"}, {"id": "wait"}]}}],
    "output": {"choice": "${{steps.approve.choice}}", "by": "${{steps.approve.resolved_by}}"}}}


def answering(action, asked):
    async def callback(context, params):
        asked.append(params)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"choice": "merge", "reasoning": "green"})
        return types.ElicitResult(action=action)
    return callback


async def asked_once(asked, seconds=15):
    for _ in range(seconds * 20):
        if asked:
            return asked[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no elicitation/create arrived")


async def main(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port(), env={"OPCODE_ELICIT_DECISIONS": "true"},
                        log=f"{home}/daemon.log")
        daemon.start()
        url = f"{daemon.url}/mcp"
        try:
            asked = []
            # An SSE session open meanwhile must not make the question asked twice.
            async with Client(url, mode="legacy", elicitation_callback=answering("accept", asked)) as client, \
                    Client(sse_client(f"{daemon.url}/sse")) as bystander:
                data(await bystander.call_tool("opcode.query", {"resource": "templates"}))
                data(await client.call_tool("opcode.define", GATE))
                run = data(await client.call_tool("opcode.run", {"template_name": "gate", "agent_id": "lead"}))
                question = await asked_once(asked)
                choice = question.requested_schema["properties"]["choice"]
                check("Merge the release branch?" in question.message and choice["enum"] == ["merge", "wait"],
                      f"the question {question}")
                done = await wait_for(client, run["workflow_id"], ("completed",))
                check(done["output"] == {"choice": "merge", "by": "lead"}, f"the elicited answer: {done}")
                await asyncio.sleep(0.3)
                check(len(asked) == 1, f"the question was asked {len(asked)} times")
            print("ok - elicit: a pending decision is asked of its agent's session as a form; the answer resolves it")

            dismissed = []
            async with Client(url, mode="legacy", elicitation_callback=answering("cancel", dismissed)) as client:
                run = data(await client.call_tool("opcode.run", {"template_name": "gate", "agent_id": "lead"}))
                await asked_once(dismissed)
                await asyncio.sleep(0.3)
                still = data(await client.call_tool("opcode.status", {"workflow_id": run["workflow_id"]}))
                check(still["status"] == "suspended", f"a dismissed form changed the run: {still}")
            daemon.kill()
            daemon.start()
            again = []
            async with Client(url, mode="legacy", elicitation_callback=answering("accept", again)) as client:
                data(await client.call_tool("opcode.query", {"resource": "decisions", "agent_id": "lead"}))
                await asked_once(again)
                done = await wait_for(client, run["workflow_id"], ("completed",))
                check(done["output"]["choice"] == "merge", f"after the restart: {done}")
            print("ok - elicit: a dismissed form leaves it pending; after a kill -9 the agent's next session "
                  "is asked again and its answer completes the run")
        finally:
            daemon.terminate()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
