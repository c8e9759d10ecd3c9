"""The daemon driven by the official MCP Python SDK, over both transports.

Starts `opcode serve` on a free port with a fresh database, then, over
Streamable HTTP (`/mcp`, `mcp.Client`) and legacy SSE (`/sse`,
`mcp.client.sse.sse_client`): lists the tools, defines a workflow, has a
broken one rejected with its diagnostics as data, runs a reasoning
workflow that suspends, reads its status, resolves its decision, queries
and draws it. Then calls a template exposed as a tool by name and hears
`tools/list_changed` and `resources/updated` (in a session and through
`subscriptions/listen`). Also checks that a foreign Origin gets 403 on
every entry point. Exits non-zero on the first failure.

Usage: python clients.py PATH_TO_OPCODE
"""

import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings

import anyio
import jsonpatch
from mcp import Client
from mcp.client.sse import sse_client

from daemon import Daemon, free_port

TOOLS = {"opcode.define", "opcode.run", "opcode.status", "opcode.signal", "opcode.query", "opcode.diagram"}

REVIEW = {
    "name": "review",
    "agent_id": "bot-1",
    "description": "greet, then ask",
    "input_schema": {"type": "object", "properties": {"who": {"type": "string", "default": "world"}}},
    "definition": {"steps": [
        {"id": "greet", "action": "workflow.log", "params": {"message": "hello ${{inputs.who}}"}},
        {"id": "approve", "type": "reasoning", "depends_on": ["greet"], "config": {
            "prompt_context": "Ship it?",
            "options": [{"id": "yes", "description": "ship"}, {"id": "no", "description": "stop"}]}},
    ]},
}

BROKEN = {"name": "broken", "agent_id": "bot-1",
          "definition": {"steps": [{"id": "a", "action": "http.gett", "params": {"url": "x"}}]}}


# A definition sent as JSON text, as an agent writes it (its own layout,
# not ASCII only), with two mistakes that each have a fix.
BROKEN_TEXT = """{
  "steps": [
    {"id": "fetch", "action": "http.fetch", "params": {"url": "https://example.com/é"}},
    {"id": "say", "action": "workflow.log", "depends_on": ["fech"], "params": {"message": "done"}}
  ]
}"""


async def text_definition_fixes(client, transport):
    """A JSON-text definition's diagnostics are said in that text: positions
    in it, edits that apply to it, patches on the definition it holds."""
    error = error_of(await client.call_tool("opcode.define", {"name": "text", "definition": BROKEN_TEXT}))
    diagnostics = [d for d in error["details"]["diagnostics"] if d["severity"] == "error"]
    check(len(diagnostics) == 2 and all(d["file"] == "definition.json" for d in diagnostics),
          f"{transport}: text diagnostics {diagnostics}")
    lines = BROKEN_TEXT.split("\n")
    for d in diagnostics:
        shown = lines[d["line"] - 1][d["column"] - 1:]
        check(shown.startswith(('"http.fetch"', '"fech"')), f"{transport}: {d['code']} at {shown!r}")
    fixes = [d["fix"] for d in diagnostics]
    check(all(f.get("edits") and f.get("patch") for f in fixes), f"{transport}: text fixes {fixes}")
    edited = BROKEN_TEXT.encode()
    for edit in sorted((e for f in fixes for e in f["edits"]), key=lambda e: e["start"], reverse=True):
        edited = edited[:edit["start"]] + edit["replacement"].encode() + edited[edit["end"]:]
    data(await client.call_tool("opcode.define", {"name": "text-edited", "definition": edited.decode()}))
    patched = jsonpatch.apply_patch(json.loads(BROKEN_TEXT), [op for f in fixes for op in f["patch"]])
    data(await client.call_tool("opcode.define", {"name": "text-patched", "definition": json.dumps(patched)}))


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def data(result):
    """The structured result of a tool call. The text must agree: the same
    JSON, or (at the 2026-07-28 revision) a headline of 200 characters at
    most."""
    structured = result.structured_content
    check(structured is not None, f"no structuredContent in {result}")
    text = result.content[0].text
    try:
        check(json.loads(text) == structured, "the text content and structuredContent differ")
    except ValueError:
        check(len(text) <= 200 and "\n" not in text, f"the text is not a headline: {text!r}")
    return structured


def error_of(result):
    """A failed call's error: `isError`, no structured content (each tool's
    output schema describes its success), the text `{"error": {...}}`."""
    check(result.is_error, f"the call did not fail: {result}")
    check(result.structured_content is None, f"an error result carries structuredContent: {result}")
    return json.loads(result.content[0].text)["error"]


ENDED = ("completed", "failed", "cancelled")


async def whole(client, value):
    """`value`, read from its resource when it was too big to inline
    (`{bytes, uri}`); the resource's length must be what the result said."""
    if not (isinstance(value, dict) and set(value) == {"bytes", "uri"}):
        return value
    read = await client.read_resource(value["uri"])
    text = read.contents[0].text
    check(len(text.encode()) == value["bytes"], f"{value['uri']}: {len(text.encode())} bytes, said {value}")
    return json.loads(text)


async def wait_for(client, workflow_id, statuses, seconds=15, include=()):
    """The workflow's status (with the details `include` names) once it is
    one of `statuses` (within `seconds`)."""
    deadline = time.time() + seconds
    while True:
        current = data(await client.call_tool("opcode.status", {"workflow_id": workflow_id,
                                                                "include": list(include)}))
        if current["status"] in statuses:
            return current
        check(time.time() < deadline, f"{workflow_id} is {current['status']}, not one of {statuses}")
        await asyncio.sleep(0.1)


async def scenario(client, transport):
    tools = await client.list_tools()
    names = {t.name for t in tools.tools}
    check(names == TOOLS, f"{transport}: tools are {names}")

    defined = data(await client.call_tool("opcode.define", REVIEW))
    check(defined["version"].startswith("v"), f"{transport}: define gave {defined}")

    broken = await client.call_tool("opcode.define", BROKEN)
    error = error_of(broken)
    check(error["code"] == "R0123", f"{transport}: broken define gave {error}")
    first = [d for d in error["details"]["diagnostics"] if d["severity"] == "error"][0]
    check(first["pointer"] == "/definition/steps/0/action", f"{transport}: pointer {first['pointer']}")
    check(first["line"] > 1 and first["column"] >= 1 and first["fix"], f"{transport}: diagnostic {first}")
    # Every fix applies as an RFC 6902 patch to the arguments sent (the text
    # the server compiled is its own: no text edits come), and the patched
    # arguments define cleanly.
    fixes = [d["fix"] for d in error["details"]["diagnostics"] if "fix" in d]
    check(fixes and all("edits" not in f and f["patch"] for f in fixes), f"{transport}: fixes {fixes}")
    repaired = jsonpatch.apply_patch(BROKEN, [op for f in fixes for op in f["patch"]])
    repaired["name"] = f"repaired-{transport}"
    data(await client.call_tool("opcode.define", repaired))
    await text_definition_fixes(client, transport)

    run = data(await client.call_tool("opcode.run", {"template_name": "review", "agent_id": "bot-1",
                                                     "params": {"who": transport}}))
    check(run["status"] == "suspended", f"{transport}: run gave {run['status']}")
    workflow_id = run["workflow_id"]
    check(run["pending_decisions"][0]["id"] == "approve", f"{transport}: pending {run['pending_decisions']}")

    status = data(await client.call_tool("opcode.status", {"workflow_id": workflow_id, "include": ["steps"]}))
    check(status["steps"]["greet"]["status"] == "completed", f"{transport}: status {status['steps']}")

    listed = {r.uri for r in (await client.list_resources()).resources}
    check({"opcode://actions", "opcode://docs/language", "opcode://templates/review"} <= listed,
          f"{transport}: resources {listed}")
    templates = {t.name for t in (await client.list_resource_templates()).resource_templates}
    check({"run", "step-output", "template"} <= templates, f"{transport}: resource templates {templates}")
    catalog = json.loads((await client.read_resource("opcode://actions")).contents[0].text)
    names = {a["name"] for a in catalog["actions"]}
    check({"http.get", "shell.exec", "workflow.log"} <= names and all(a["doc"] for a in catalog["actions"]),
          f"{transport}: catalog {sorted(names)[:10]}")
    skill = (await client.read_resource("skill://opcode/SKILL.md")).contents[0].text
    check(skill.startswith("---\nname: opcode\n") and "opcode.define" in skill, f"{transport}: skill {skill[:80]}")
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    check(set(prompts) == {"write-workflow", "fix-workflow"}, f"{transport}: prompts {set(prompts)}")
    write = (await client.get_prompt("write-workflow", {"goal": "hash a file"})).messages[0].content.text
    check("## Step" in write and "## `http.get`" in write and write.rstrip().endswith("fix what the diagnostics name."),
          f"{transport}: write-workflow {write[-200:]}")
    fix = (await client.get_prompt("fix-workflow", {"definition": json.dumps(BROKEN)})).messages[0].content.text
    check("does not compile" in fix and '"E0040"' in fix and "http.get" in fix, f"{transport}: fix-workflow {fix[:400]}")
    view = json.loads((await client.read_resource(f"opcode://runs/{workflow_id}")).contents[0].text)
    check(view["status"] == "suspended", f"{transport}: run resource {view}")
    greet = f"opcode://runs/{workflow_id}/steps/greet/output"
    whole_text = (await client.read_resource(greet)).contents[0].text
    part = (await client.read_resource(f"{greet}?offset=2&length=5")).contents[0]
    check(part.text == whole_text.encode()[2:7].decode(), f"{transport}: range {part.text!r} of {whole_text!r}")
    try:
        await client.read_resource(f"opcode://runs/{workflow_id}/steps/nope/output")
        check(False, f"{transport}: a missing step's output was read")
    except Exception as e:  # the SDK raises the JSON-RPC error
        check("nope" in str(e), f"{transport}: missing step error {e}")

    answer = data(await client.call_tool("opcode.signal", {
        "workflow_id": workflow_id, "signal_type": "decision", "step_id": "approve",
        "payload": {"choice": "yes"}, "reasoning": "looks right", "agent_id": "bot-1"}))
    check(answer["status"] == "completed" and answer["resumed"], f"{transport}: signal gave {answer}")
    check(answer["output"]["approve"]["choice"] == "yes", f"{transport}: output {answer['output']}")

    workflows = data(await client.call_tool("opcode.query", {
        "resource": "workflows", "filter": {"template_name": "review", "status": "completed"}}))
    check(any(w["id"] == workflow_id for w in workflows["workflows"]), f"{transport}: query {workflows}")
    events = data(await client.call_tool("opcode.query", {
        "resource": "events", "filter": {"workflow_id": workflow_id}, "limit": 100}))
    types = [e["event_type"] for e in events["events"]]
    check("decision_resolved" in types and types[-1] == "workflow_completed", f"{transport}: events {types}")
    templates = data(await client.call_tool("opcode.query", {"resource": "templates", "filter": {"name": "review"}}))
    check(templates["templates"][0]["name"] == "review", f"{transport}: templates {templates}")

    mermaid = data(await client.call_tool("opcode.diagram", {"workflow_id": workflow_id, "format": "mermaid"}))
    check(mermaid["diagram"].startswith("flowchart TD") and "st_completed" in mermaid["diagram"],
          f"{transport}: mermaid {mermaid}")
    ascii_ = data(await client.call_tool("opcode.diagram", {"template_name": "review", "format": "ascii"}))
    check("approve (reasoning) <- greet" in ascii_["diagram"], f"{transport}: ascii {ascii_}")
    for fmt, mime, magic in [("png", "image/png", b"\x89PNG"), ("svg", "image/svg+xml", b"<svg")]:
        drawn = await client.call_tool("opcode.diagram", {"workflow_id": workflow_id, "format": fmt})
        image = drawn.content[0]
        check(image.type == "image" and image.mime_type == mime, f"{transport}: {fmt} content {drawn.content}")
        check(base64.b64decode(image.data).startswith(magic), f"{transport}: {fmt} bytes")
        check(drawn.structured_content["format"] == fmt and "image" not in drawn.structured_content,
              f"{transport}: {fmt} structured {drawn.structured_content}")
    print(f"ok - {transport}: define, broken define, run, status, resources (list, templates, read, a range, the skill), prompts, signal, query, diagram")


NOTIFY = {"name": "notifier", "agent_id": "bot-2", "definition": {"steps": [
    {"id": "tell", "action": "workflow.notify", "params": {"message": "build done", "data": {"n": 3}}}]}}


async def notify_scenario(base, transport, connect):
    """workflow.notify reaches the session of the agent that started the run."""
    received = []

    async def on_log(params):
        received.append(params)

    async with Client(connect(), logging_callback=on_log) as client:
        data(await client.call_tool("opcode.define", NOTIFY))
        run = data(await client.call_tool("opcode.run", {"template_name": "notifier", "agent_id": "bot-2",
                                                         "include": ["outputs"]}))
        check(run["steps"]["tell"]["output"]["notified"] is True, f"{transport}: notify output {run['steps']['tell']}")
        for _ in range(50):
            if received:
                break
            await asyncio.sleep(0.05)
    check(received, f"{transport}: no notification arrived")
    note = received[0].data
    check(note["message"] == "build done" and note["step_id"] == "tell" and note["data"] == {"n": 3},
          f"{transport}: notification {note}")
    print(f"ok - {transport}: workflow.notify reaches the agent's session")


GATE = {"name": "deploy_gate", "expose": True, "description": "Asks whether to ship a build.",
        "input_schema": {"type": "object", "properties": {"build": {"type": "string", "description": "the build"}},
                         "required": ["build"]},
        "definition": {"steps": [{"id": "approve", "type": "reasoning", "config": {
            "prompt_context": "Ship it?", "options": [{"id": "ship"}, {"id": "hold"}]}}],
            "output": {"choice": "${{steps.approve.output.choice}}"}}}


async def next_event(events, what, seconds=10):
    with anyio.fail_after(seconds):
        while True:
            event = await events.get()
            if what(event):
                return event


async def exposed_scenario(base):
    """A template defined with `expose: true` is a tool of its own, called
    by name; sessions hear `tools/list_changed`, and `resources/updated`
    for a run they subscribed to, both in a 2025-11-25 session and through
    `subscriptions/listen` at 2026-07-28."""
    events = asyncio.Queue()

    async def on_message(message):
        root = getattr(message, "root", message)
        if hasattr(root, "method"):
            await events.put(root)

    async with Client(f"{base}/mcp", mode="legacy", message_handler=on_message) as legacy, \
            Client(f"{base}/mcp", mode="2026-07-28") as modern:
        async with modern.listen(tools_list_changed=True) as listening:
            data(await legacy.call_tool("opcode.define", GATE))
            await next_event(events, lambda e: e.method == "notifications/tools/list_changed")
            with anyio.fail_after(10):
                heard = await listening.__anext__()
            check("Tools" in type(heard).__name__, f"subscriptions/listen gave {heard}")
        for client, revision in [(legacy, "2025-11-25"), (modern, "2026-07-28")]:
            tool = {t.name: t for t in (await client.list_tools()).tools}.get("deploy_gate")
            check(tool and tool.input_schema["required"] == ["build"] and tool.description.startswith("Asks"),
                  f"{revision}: the exposed template's tool {tool}")
            ran = data(await client.call_tool("deploy_gate", {"build": "b-1"}))
            check(ran["status"] == "suspended" and ran["pending_decisions"][0]["options"][0]["id"] == "ship",
                  f"{revision}: deploy_gate gave {ran}")
        run = data(await legacy.call_tool("deploy_gate", {"build": "b-2"}))
        uri = f"opcode://runs/{run['workflow_id']}"
        with warnings.catch_warnings():  # deprecated at 2026-07-28, this session's way before it
            warnings.simplefilter("ignore")
            await legacy.subscribe_resource(uri)
        async with modern.listen(resource_subscriptions=[uri]) as listening:
            data(await legacy.call_tool("opcode.signal", {
                "workflow_id": run["workflow_id"], "signal_type": "decision", "step_id": "approve",
                "payload": {"choice": "ship"}}))
            await next_event(events, lambda e: e.method == "notifications/resources/updated"
                             and e.params.uri == uri)
            with anyio.fail_after(10):
                heard = await listening.__anext__()
            check(getattr(heard, "uri", None) == uri, f"subscriptions/listen gave {heard}")
        done = json.loads((await legacy.read_resource(uri)).contents[0].text)
        check(done["status"] == "completed" and done["output"] == {"choice": "ship"}, f"the run resource {done}")
    print("ok - an exposed template is a tool called by name; tools/list_changed and resources/updated "
          "reach a 2025-11-25 session and a 2026-07-28 subscriptions/listen")


def publish_agent(binary, home, db):
    """Publishes an agent with `opcode agent publish` into the daemon's
    database, while it serves."""
    folder = f"{home}/agents"
    os.makedirs(f"{folder}/skills/db", exist_ok=True)
    with open(f"{folder}/skills/db/SKILL.md", "w") as f:
        f.write("Read the indexes first.\n")
    with open(f"{folder}/db-analyzer.agent.json", "w") as f:
        json.dump({"name": "db-analyzer", "version": "1.0.0", "role": "scout",
                   "description": "Reads schemas.",
                   "skills": [{"name": "db", "path": "skills/db/SKILL.md"}]}, f)
    out = subprocess.run([binary, "agent", "publish", f"{folder}/db-analyzer.agent.json", "--db", db],
                         capture_output=True, text=True, env=dict(os.environ, HOME=home))
    check(out.returncode == 0 and "published db-analyzer@1.0.0" in out.stdout, f"agent publish: {out}")


async def agents_scenario(client, transport):
    """The published agent as resources, and an unknown one as the SDK's error."""
    listed = {r.uri for r in (await client.list_resources()).resources}
    check({"opcode://agents", "opcode://agents/db-analyzer"} <= listed, f"{transport}: agents {listed}")
    catalog = json.loads((await client.read_resource("opcode://agents")).contents[0].text)
    check(catalog["agents"][0]["newest"] == "1.0.0", f"{transport}: agent catalog {catalog}")
    release = json.loads((await client.read_resource("opcode://agents/db-analyzer/1.0.0")).contents[0].text)
    check(release["definition"]["skills"] == [{"name": "db", "content": "Read the indexes first.\n"}],
          f"{transport}: agent release {release}")
    try:
        await client.read_resource("opcode://agents/db-analyser")
        check(False, f"{transport}: an unknown agent was read")
    except Exception as e:  # the SDK raises the JSON-RPC error: resource not found, coded
        check("db-analyser" in str(e), f"{transport}: unknown agent error {e}")
    print(f"ok - {transport}: a published agent is listed and read as resources; an unknown one is not found")
    name = f"py-{transport}"
    agent = {"name": name, "version": "0.1.0", "role": "worker", "skills": [{"name": "s", "path": "SKILL.md"}]}
    refused = error_of(await client.call_tool("opcode.define", {"agent": agent}))
    found = [(d["code"], d["pointer"]) for d in refused["details"]["diagnostics"]]
    check(refused["code"] == "R0123" and found == [("E0064", "/agent/skills/0/path")],
          f"{transport}: a skill by path over MCP: {refused}")
    # Skills are bounded however they come: a file (tests/agents.rs), inline, over MCP.
    agent["skills"] = [{"name": "s", "content": "x" * (1024 * 1024 + 1)}]
    refused = error_of(await client.call_tool("opcode.define", {"agent": agent}))
    found = [(d["code"], d["pointer"]) for d in refused["details"]["diagnostics"]]
    check(found == [("E0064", "/agent/skills/0/content")], f"{transport}: a skill over 1 MiB over MCP: {found}")
    agent["skills"] = [{"name": "s", "content": "Fix it."}]
    published = data(await client.call_tool("opcode.define", {"name": name, "agent": agent}))
    check(published["kind"] == "agent" and published["version"] == "0.1.0" and not published["unchanged"],
          f"{transport}: published over MCP: {published}")
    release = json.loads((await client.read_resource(f"opcode://agents/{name}")).contents[0].text)
    check(release["definition"]["skills"][0]["content"] == "Fix it." and release["published_by"] is None,
          f"{transport}: the release published over MCP: {release}")
    print(f"ok - {transport}: an agent is published over MCP (opcode.define with `agent`), a skill by path refused")


def refused(url, method="GET", origin="https://evil.example"):
    request = urllib.request.Request(url, method=method, headers={"Origin": origin, "Content-Type": "application/json"},
                                     data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


async def main(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        base = daemon.url
        try:
            publish_agent(binary, home, daemon.db)
            async with Client(f"{base}/mcp") as client:
                await scenario(client, "streamable-http")
                await agents_scenario(client, "streamable-http")
            async with Client(sse_client(f"{base}/sse")) as client:
                await scenario(client, "sse")
                await agents_scenario(client, "sse")
            await notify_scenario(base, "sse", lambda: sse_client(f"{base}/sse"))
            await notify_scenario(base, "streamable-http", lambda: f"{base}/mcp")
            await exposed_scenario(base)
            for url, method in [(f"{base}/mcp", "POST"), (f"{base}/sse", "GET"), (f"{base}/message?sessionId=x", "POST")]:
                code = refused(url, method)
                check(code == 403, f"a foreign Origin on {method} {url} got {code}")
            print("ok - a foreign Origin gets 403 on /mcp, /sse and /message")
        finally:
            daemon.terminate()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
