"""The daemon's life: a taken port, SIGKILL with workflows in flight and a
restart that resumes them, scheduled jobs due while it was down, SIGTERM.

Usage: python lifecycle.py PATH_TO_OPCODE
"""

import asyncio
import json
import os
import pty
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

from mcp import Client
from mcp.client.sse import sse_client

from clients import check, data, wait_for
from daemon import Daemon, free_port
from raw import Session


def on_terminal(command, env):
    """Runs `command` with its stderr on a pseudo-terminal: its exit code
    and what it wrote there."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other end closed.
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    return process.wait(timeout=30), written.decode(errors="replace").replace("\r\n", "\n")


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


async def main(binary):
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()

        taken = subprocess.run([binary, "serve", "--listen", f"127.0.0.1:{daemon.port}", "--db", f"{home}/other.db"],
                               env=dict(os.environ, HOME=home), capture_output=True, text=True, timeout=30)
        check(taken.returncode == 2 and "already in use" in taken.stderr, f"port taken: {taken}")
        said = json.loads(taken.stderr.strip().splitlines()[-1])
        check(said["level"] == "ERROR" and "already in use" in said["fields"]["message"], f"the log line: {said}")
        # At a terminal, the same refusal is a sentence for a person.
        code, text = on_terminal([binary, "serve", "--listen", f"127.0.0.1:{daemon.port}", "--db",
                                  f"{home}/other.db"], dict(os.environ, HOME=home))
        check(code == 2 and text.startswith("opcode serve: ") and "already in use" in text
              and not text.lstrip().startswith("{"), f"port taken, at a terminal: {text!r}")
        print("ok - a taken port is a clear error: a JSON log line, or a sentence at a terminal")

        slow = {"name": "slow", "agent_id": "bot", "definition": {"steps": [
            {"id": "nap", "type": "wait", "config": {"duration": "2s"}},
            {"id": "after", "action": "workflow.log", "depends_on": ["nap"], "params": {"message": "woke"}}]}}
        # Long enough for the calls of the SIGTERM check to all be waiting.
        long = {"name": "long", "agent_id": "bot", "definition": {"steps": [
            {"id": "nap", "type": "wait", "config": {"duration": "6s"}}]}}
        ping = {"name": "ping", "agent_id": "bot",
                "definition": {"steps": [{"id": "p", "action": "workflow.log", "params": {"message": "ping"}}]}}
        async with Client(f"{daemon.url}/mcp") as client:
            data(await client.call_tool("opcode.define", slow))
            data(await client.call_tool("opcode.define", ping))
            data(await client.call_tool("opcode.define", long))
            ids = [data(await client.call_tool("opcode.run", {"template_name": "slow", "wait": False}))["workflow_id"]
                   for _ in range(5)]
        for policy in ["run-once", "skip"]:
            subprocess.run([binary, "schedule", "add", "--db", f"{home}/opcode.db", "--id", policy,
                            "--template", "ping", "--cron", "0 0 1 1 *", "--missed", policy], check=True,
                           capture_output=True)
        await asyncio.sleep(0.3)
        daemon.kill()
        # While it is down, both jobs come due (five minutes ago).
        due = datetime.now(timezone.utc) - timedelta(minutes=5)
        with sqlite3.connect(f"{home}/opcode.db") as db:
            db.execute("UPDATE scheduled_jobs SET next_run_at = ?", (iso(due),))
        daemon.start()
        async with Client(f"{daemon.url}/mcp") as client:
            for workflow_id in ids:
                done = await wait_for(client, workflow_id, ("completed",), include=["steps"])
                check(done["steps"]["after"]["status"] == "completed", f"{workflow_id}: {done['steps']}")
            print("ok - workflows in flight at SIGKILL resume and complete after a restart")
            deadline = time.time() + 10
            while True:
                jobs = {j["id"]: j for j in data(await client.call_tool(
                    "opcode.query", {"resource": "schedules"}))["schedules"]}
                if jobs["run-once"]["last_run_status"] == "completed" and jobs["skip"]["last_run_status"] == "skipped":
                    break
                check(time.time() < deadline, f"schedules after restart: {jobs}")
                await asyncio.sleep(0.2)
            runs = data(await client.call_tool("opcode.query", {
                "resource": "workflows", "filter": {"template_name": "ping"}}))["workflows"]
            check(len(runs) == 1 and runs[0]["id"].startswith("sched-run-once-"), f"scheduled runs: {runs}")
            print("ok - a job due while down runs once (run-once) or not at all (skip)")
            running = data(await client.call_tool("opcode.run", {"template_name": "long", "wait": False}))
            # Three calls wait on runs of their own: a Streamable HTTP
            # session's (its answer an event stream), a stateless one's
            # (plain JSON) and a legacy SSE session's.
            waiting = [asyncio.to_thread(run_and_wait, daemon.url, revision)
                       for revision in ("2025-11-25", "2026-07-28")]
            waits = asyncio.gather(*waiting, legacy_run_and_wait(daemon.url))
            deadline = time.time() + 10
            while len(data(await client.call_tool("opcode.query", {
                    "resource": "workflows", "filter": {"status": "active"}}))["workflows"]) < 4:
                check(time.time() < deadline, "the waiting calls' runs did not start")
                await asyncio.sleep(0.05)
        # A legacy SSE session, the panel's live feed and an AG-UI stream stay
        # open through the stop: each ends with the daemon (each used to hold
        # it up until its client left).
        live = urllib.request.urlopen(f"{daemon.url}/panel/live", timeout=30)
        agui = urllib.request.urlopen(f"{daemon.url}/api/runs/{running['workflow_id']}/ag-ui", timeout=30)
        streams = asyncio.gather(asyncio.to_thread(live.read), asyncio.to_thread(agui.read))
        async with Client(sse_client(f"{daemon.url}/sse")):
            began = time.time()
            code = await asyncio.to_thread(daemon.terminate)
            check(code == 0 and time.time() - began < 3,
                  f"SIGTERM exit code {code} after {time.time() - began:.1f} s")
        _, followed = await streams
        last = json.loads([line for line in followed.decode().splitlines() if line.startswith("data:")][-1][5:])
        check(last["type"] == "RUN_ERROR" and last["code"] == "R0134", f"the AG-UI stream ended with {last}")
        stopped = [reply["result"] for reply in await waits]
        for result in stopped:
            check(result.get("isError"), f"a wait cut by SIGTERM answered {result}")
            check("structuredContent" not in result, f"an error result carries structuredContent: {result}")
            error = json.loads(result["content"][0]["text"])["error"]
            check(error["code"] == "R0134" and error["details"]["workflow_id"], f"the stop answered {error}")
        print("ok - SIGTERM ends the calls waiting on runs with R0134 naming their runs (Streamable HTTP "
              "with and without a session, legacy SSE, AG-UI) and exits at once with streams open")
        daemon.start()
        async with Client(f"{daemon.url}/mcp") as client:
            await wait_for(client, running["workflow_id"], ("completed",))
            for result in stopped:
                stopped_id = json.loads(result["content"][0]["text"])["error"]["details"]["workflow_id"]
                await wait_for(client, stopped_id, ("completed",))
        daemon.terminate()
        print("ok - SIGTERM stops cleanly and the interrupted workflows complete after the next start")


def run_and_wait(url, revision):
    """`opcode.run` of `long`, waiting, through a raw client at `revision`."""
    client = Session(f"{url}/mcp", revision)
    client.open()
    reply, _ = client.request("tools/call", {"name": "opcode.run", "arguments": {"template_name": "long"}})
    return reply


async def legacy_run_and_wait(url):
    """`opcode.run` of `long`, waiting, through a legacy SSE session."""
    async with Client(sse_client(f"{url}/sse")) as legacy:
        result = await legacy.call_tool("opcode.run", {"template_name": "long"})
    answer = {"isError": result.is_error, "content": [{"type": "text", "text": result.content[0].text}]}
    if result.structured_content is not None:
        answer["structuredContent"] = result.structured_content
    return {"result": answer}


def status_of(url, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError:
        return None


def settings_and_tokens(binary):
    """`opcode install` writes the settings; a network address needs a
    token; SIGHUP swaps the token without a restart."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home)
        port = free_port()
        exposed = subprocess.run([binary, "serve", "--listen", f"0.0.0.0:{port}", "--db", f"{home}/o.db"],
                                 env=env, capture_output=True, text=True, timeout=30)
        check(exposed.returncode == 2 and "token" in exposed.stderr, f"no token off loopback: {exposed}")
        short = subprocess.run([binary, "install", "--listen", f"127.0.0.1:{port}", "--token", "first"],
                               env=env, capture_output=True, text=True, timeout=30)
        check(short.returncode == 2 and "at least 16" in short.stderr, f"a short token was installed: {short}")
        first, second = "first-token-0123456789", "second-token-0123456789"
        # opcode's spellings: --listen-addr, and the vault key itself.
        installed = subprocess.run([binary, "install", "--listen-addr", f"127.0.0.1:{port}", "--token", first,
                                    "--vault-key", "install-passphrase"],
                                   env=env, capture_output=True, text=True, timeout=30, check=True)
        path = f"{home}/.opcode/settings.json"
        check(path in installed.stdout, f"install said {installed.stdout}")
        check("visible to other users" in installed.stderr, f"no warning for a key on the command line: {installed}")
        with open(path) as f:
            settings = json.load(f)
        check(settings["listen"] == f"127.0.0.1:{port}" and settings["token"] == first, f"settings {settings}")
        key_file = settings["vault_key_file"]
        with open(key_file) as f:
            check(f.read().strip() == "install-passphrase", "the key file holds the key")
        for private in (path, key_file):
            mode = os.stat(private).st_mode & 0o777
            check(mode == 0o600, f"{private} has mode {mode:o}, not 600")
        daemon = subprocess.Popen([binary], env=env, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/livez"
        try:
            deadline = time.time() + 30
            while status_of(url, first) != 200:
                check(time.time() < deadline and daemon.poll() is None, "plain `opcode` did not serve")
                time.sleep(0.05)
            check(status_of(url) == 401 and status_of(url, "wrong") == 401, "a missing or wrong token passes")
            settings["token"] = second
            with open(path, "w") as f:
                json.dump(settings, f)
            daemon.send_signal(signal.SIGHUP)
            # Not in a tight loop: wrong tokens are slowed down after a few.
            deadline = time.time() + 10
            time.sleep(0.3)
            while status_of(url, second) != 200:
                check(time.time() < deadline, "SIGHUP did not load the new token")
                time.sleep(1)
            check(status_of(url, first) == 401, "the old token still works after SIGHUP")
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)
    print("ok - install writes settings (0600; opcode's --listen-addr and --vault-key, with a warning); "
          "off loopback needs a token; SIGHUP swaps it live")


def session_end(binary):
    """`DELETE /mcp` ends a session with 204 (the Python SDK warns on 202)."""
    with tempfile.TemporaryDirectory() as home:
        daemon = Daemon(binary, home, free_port())
        daemon.start()
        try:
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-11-25"}
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            request = urllib.request.Request(f"{daemon.url}/mcp", json.dumps(hello).encode(), headers)
            with urllib.request.urlopen(request, timeout=10) as response:
                session = response.headers["Mcp-Session-Id"]
            end = urllib.request.Request(f"{daemon.url}/mcp", method="DELETE",
                                         headers={**headers, "Mcp-Session-Id": session})
            with urllib.request.urlopen(end, timeout=10) as response:
                check(response.status in (200, 204), f"DELETE /mcp answered {response.status}")
        finally:
            daemon.terminate()
    print("ok - DELETE /mcp ends the session with 204")


if __name__ == "__main__":
    session_end(sys.argv[1])
    settings_and_tokens(sys.argv[1])
    asyncio.run(main(sys.argv[1]))
