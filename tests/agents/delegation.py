"""Delegated agents through a real daemon (spec/agents.md): `agent.scout`,
`agent.worker` and `agent.runner` steps run tests/agents/scripted_agent.py
— a real program speaking the plain protocol and OpenCode's event stream —
in the real sandbox, with the real worktree lock, budgets, permission
answers and transcripts. Each section prints `ok` when it held.

Usage: python delegation.py PATH_TO_OPCODE
"""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))

from common import TOKEN, VAULT_KEY, Expectations, call, operator_daemon, read  # noqa: E402
from raw import Session  # noqa: E402
import registry_steps  # noqa: E402

API = "sk-agent-" + secrets.token_hex(8)

SANDBOX_USER = 65534
TEMPLATES = ["scout", "worker", "pair", "budget", "runner", "oc", "broken", "ask", "secret", "slow", "session", "chat", "delegated-change", "fill-home",
             *registry_steps.TEMPLATES]


def world(nonce):
    """A base the sandbox user can reach, holding the agent and a Git
    checkout the worker may write."""
    base = f"/var/tmp/opcode-agents-{nonce}"
    os.makedirs(f"{base}/repo/src", mode=0o755)
    os.chmod(base, 0o755)
    shutil.copy(os.path.join(os.path.dirname(__file__), "scripted_agent.py"), f"{base}/agent.py")
    os.chmod(f"{base}/agent.py", 0o755)
    with open(f"{base}/repo/src/app.txt", "w") as f:
        f.write("v1\n")
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", f"{base}/repo"], check=True)
    else:
        os.makedirs(f"{base}/repo/.git")
        with open(f"{base}/repo/.git/config", "w") as f:
            f.write("[core]\n")
    for root, dirs, files in os.walk(f"{base}/repo"):
        for name in dirs + files:
            os.chown(os.path.join(root, name), SANDBOX_USER, SANDBOX_USER)
    os.chown(f"{base}/repo", SANDBOX_USER, SANDBOX_USER)
    return base


def settings(base):
    agent = ["python3", f"{base}/agent.py"]
    return {
        "agents": {
            "script": {"protocol": "plain", "command": [*agent, "plain"], "default": True},
            "oc": {"protocol": "opencode", "command": [*agent, "opencode", ["--model", "{model}"], "{prompt}"]},
        },
        "isolation": {"grants": [{"template": t, "workspaces": [base]} for t in TEMPLATES]},
    }


def step(step_id, role, script, repo, **params):
    return {"id": step_id, "action": f"agent.{role}",
            "params": {"prompt": "\n".join(script), "workspace": repo, **params}}


def run(daemon, name, steps, **arguments):
    call(daemon, "opcode.define", {"name": name, "definition": {"steps": steps}})
    return call(daemon, "opcode.run", {"template_name": name, "include": ["outputs"], **arguments})


def output(result, step_id):
    return result["steps"][step_id].get("output") or {}


def processes_running(text):
    """The pids whose command line holds `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def until_running(text, within=20):
    """Waits until a process whose command line holds `text` runs."""
    deadline = time.time() + within
    while time.time() < deadline:
        if processes_running(text):
            return True
        time.sleep(0.05)
    return False


def until_decision(daemon, run_id, besides=None, within=30):
    """The id of a pending decision of `run_id` other than `besides`."""
    deadline = time.time() + within
    while time.time() < deadline:
        found = call(daemon, "opcode.query", {"resource": "decisions", "filter": {
            "workflow_id": run_id, "status": "pending"}})["decisions"]
        ids = [d["id"] for d in found if d["id"] != besides]
        if ids:
            return ids[0]
        time.sleep(0.1)
    raise AssertionError(f"{run_id} never asked (besides {besides})")


class Authorized(Session):
    """A raw MCP session that carries the daemon's bearer token."""

    def headers(self, message=None):
        return {**super().headers(message), "Authorization": f"Bearer {TOKEN}"}


def until_task(client, task_id, status, within=30):
    """The task once it has `status`."""
    deadline = time.time() + within
    task = {}
    while time.time() < deadline:
        task, _ = client.call("tasks/get", {"taskId": task_id})
        if task["status"] == status:
            return task
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} is {task.get('status')}, not {status}: {task}")


def until_event(daemon, run_id, event_type, within=30):
    """The log entries of `run_id` of `event_type`, once there is one."""
    deadline = time.time() + within
    while time.time() < deadline:
        found = call(daemon, "opcode.query", {"resource": "events", "filter": {
            "workflow_id": run_id, "event_type": event_type}})["events"]
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{run_id} logged no {event_type}")


def until_ended(daemon, run_id, within=60):
    """The run's status view with outputs, once it has ended."""
    deadline = time.time() + within
    status = {}
    while time.time() < deadline:
        status = call(daemon, "opcode.status", {"workflow_id": run_id, "include": ["outputs"]})
        if status.get("status") in ("completed", "failed", "cancelled"):
            return status
        time.sleep(0.1)
    raise AssertionError(f"{run_id} did not end: {json.dumps(status)[:2000]}")


def panel_post(daemon, path, fields):
    """Posts a panel form as a signed-in browser would; (status, Location)."""
    page = urllib.request.Request(f"{daemon.url}/", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(page, timeout=30) as response:
        cookie = response.headers.get("Set-Cookie", "").split(";")[0]
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', response.read().decode()).group(1)
    body = urllib.parse.urlencode({"csrf": csrf, **fields}).encode()
    request = urllib.request.Request(f"{daemon.url}{path}", data=body, method="POST", headers={
        "Authorization": f"Bearer {TOKEN}", "Cookie": cookie,
        "Content-Type": "application/x-www-form-urlencoded"})

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    try:
        with urllib.request.build_opener(Keep).open(request, timeout=60) as response:
            return response.status, response.headers.get("Location")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location")


def main(binary):
    nonce = secrets.token_hex(4)
    base = world(nonce)
    repo = f"{base}/repo"
    expect = Expectations()
    try:
        with tempfile.TemporaryDirectory() as home:
            subprocess.run([binary, "secret", "set", "API", "--db", f"{home}/opcode.db"], input=API, text=True,
                           check=True, env=dict(os.environ, OPCODE_VAULT_KEY=VAULT_KEY), capture_output=True)
            daemon = operator_daemon(binary, home, settings=settings(base), log=f"{home}/daemon.log")
            try:
                scout = run(daemon, "scout", [step("look", "scout", [
                    "read src/app.txt", "write src/app.txt hacked", "run touch src/made-by-scout", "say looked"], repo)])
                seen = output(scout, "look")
                expect.that(scout["status"] == "completed", f"scout run: {json.dumps(scout)[:2000]}")
                expect.that(open(f"{repo}/src/app.txt").read() == "v1\n", "the scout changed app.txt")
                expect.that(not os.path.exists(f"{repo}/src/made-by-scout"), "the scout made a file")
                expect.that(seen.get("files_changed") == [], f"files changed by a scout: {seen.get('files_changed')}")
                expect.that(seen.get("summary") == "looked" and seen.get("role") == "scout", f"scout result: {seen}")
                expect.that(any(c["exit_code"] not in (0, None) for c in seen.get("commands", [])),
                            f"the scout's touch did not fail: {seen.get('commands')}")
                expect.section("a scout reads the workspace and cannot write it")

                worker = run(daemon, "worker", [step("fix", "worker", [
                    "write src/app.txt v2", "write .git/hooks/post-commit evil", "run echo built",
                    "say changed app.txt"], repo)])
                done = output(worker, "fix")
                expect.that(worker["status"] == "completed", f"worker run: {json.dumps(worker)[:2000]}")
                expect.that(open(f"{repo}/src/app.txt").read() == "v2\n", "the worker did not write app.txt")
                expect.that(not os.path.exists(f"{repo}/.git/hooks/post-commit"), "the worker wrote into .git")
                expect.that(done.get("files_changed") == [{"path": "src/app.txt", "change": "modified"}],
                            f"files changed: {done.get('files_changed')}")
                expect.that({"command": "echo built", "exit_code": 0} in done.get("commands", []),
                            f"commands: {done.get('commands')}")
                transcript = done.get("transcript", {})
                expect.that(transcript.get("lines", 0) > 3 and os.path.isfile(transcript.get("path", "")),
                            f"no transcript file: {transcript}")
                expect.that(transcript.get("kept") is True, f"the transcript is kept in the store: {transcript}")
                expect.that(done.get("steps", 0) >= 4 and done.get("tokens", {}).get("input", 0) >= 400,
                            f"steps and tokens: {done}")
                served = read(daemon, f"opcode://runs/{worker['workflow_id']}/steps/fix/transcript")
                expect.that(served == open(transcript["path"]).read() and "echo built" in served,
                            f"the transcript resource: {served[:300]}")
                # The store's copy serves it: any daemon sharing the database, with no file.
                os.remove(transcript["path"])
                again = read(daemon, f"opcode://runs/{worker['workflow_id']}/steps/fix/transcript")
                expect.that(again == served, f"the transcript from the store: {again[:300]}")
                expect.section("a worker edits the workspace, not .git; the result says what changed, from a snapshot; "
                               "its transcript is a resource")

                ignore = {"on_error": {"strategy": "ignore"}}
                pair = run(daemon, "pair", [
                    {**step("one", "worker", ["sleep 3", "write src/one.txt 1", "say one"], repo), **ignore},
                    {**step("two", "worker", ["sleep 3", "write src/two.txt 2", "say two"], repo), **ignore}])
                worked = [s for s in ("one", "two") if output(pair, s).get("status") == "completed"]
                errors = [pair["steps"][s].get("error") or {} for s in ("one", "two")]
                codes = [e.get("code") for e in errors if e]
                expect.that(len(worked) == 1, f"two workers: {json.dumps(pair)[:3000]}")
                expect.that(codes == ["R0132"] and "one writer per worktree" in json.dumps(errors),
                            f"the refusal: {errors}")
                expect.section("two workers on one worktree: one works, the other is refused (R0132)")

                budget = run(daemon, "budget", [
                    step("slow", "worker", ["write src/notes.txt started", "loop stubborn"], repo,
                         timeout="10s", max_steps=256),
                    step("many", "scout", ["loop stubborn"], repo, max_steps=8),
                    step("polite", "scout", ["loop"], repo, max_steps=10)])
                slow, many, polite = (output(budget, s) for s in ("slow", "many", "polite"))
                expect.that(slow.get("status") == "timeout", f"over its time: {slow}")
                expect.that({"path": "src/notes.txt", "change": "added"} in slow.get("files_changed", []),
                            f"what it did before the stop: {slow.get('files_changed')}")
                expect.that(9_000 <= slow.get("duration_ms", 0) < 20_000, f"stopped at {slow.get('duration_ms')} ms")
                expect.that(many.get("status") == "step_limit" and many.get("steps", 99) <= 9, f"over its steps: {many}")
                expect.that(polite.get("status") == "completed" and polite.get("summary") == "wrapping up as told"
                            and polite.get("steps", 99) <= 10, f"told to wrap up: {polite}")
                expect.section("budgets: stopped at its timeout and its steps, reporting what it did; wrap-up heeded")

                failing = "sh -c 'echo compiling; echo \"error[E0425]: cannot find value x\" >&2; exit 101'"
                runner = run(daemon, "runner", [step("test", "runner", [
                    f"run {failing}", "run echo scratch > $OPCODE_AGENT_SCRATCH/log && cat $OPCODE_AGENT_SCRATCH/log",
                    "write src/runner.txt no", "say one command failed"], repo)])
                ran = output(runner, "test")
                commands = ran.get("commands", [])
                expect.that([c["exit_code"] for c in commands] == [101, 0], f"runner commands: {commands}")
                expect.that(any("cannot find value x" in e for e in ran.get("errors", [])), f"errors: {ran.get('errors')}")
                expect.that(not os.path.exists(f"{repo}/src/runner.txt"), "the runner wrote the workspace")
                lines = open(ran["transcript"]["path"]).read()
                expect.that("cannot find value x" in lines and "compiling" in lines, "the whole output is not kept")
                expect.section("a runner: read-only workspace, a scratch dir, errors extracted, output kept whole")

                oc = run(daemon, "oc", [step("look", "scout", ["say hello from opencode", "run ls src"], repo,
                                              agent="oc", model="test/model")])
                seen = output(oc, "look")
                expect.that(seen.get("summary") == "hello from opencode", f"opencode summary: {seen}")
                expect.that((seen.get("commands") or [{}])[0].get("command") == "ls src", f"opencode commands: {seen}")
                expect.that(abs(seen.get("cost", 0) - 0.0025) < 1e-9 and seen.get("agent") == "oc", f"cost: {seen}")
                expect.section("the OpenCode protocol: text, tool calls with exit codes, tokens and cost")

                broken = run(daemon, "broken", [step("boom", "scout", ["say about to", "crash 3"], repo)])
                error = broken["steps"]["boom"].get("error") or {}
                expect.that(broken["status"] == "failed" and "exited with code 3" in error.get("message", "")
                            and "crashing as told" in error.get("message", ""), f"broken agent: {error}")
                expect.section("an agent that dies without a report fails its step, with its stderr")

                fill = step("fill", "scout", ["run dd if=/dev/zero of=$HOME/big bs=1M count=300", "sleep 3",
                                              "say filled"], repo)
                filled = run(daemon, "fill-home", [{**fill, "isolation": {"disk": "64MiB"}}])
                error = filled["steps"]["fill"].get("error") or {}
                details = error.get("details") or {}
                expect.that(filled["status"] == "failed" and error.get("code") == "R0130"
                            and details.get("limit") == "disk" and "home" in str(details.get("place")),
                            f"an agent filling its home: {json.dumps(filled)[:1500]}")
                expect.section("an agent writing past isolation.disk into its own home is stopped (R0130, disk)")

                ask = run(daemon, "ask", [step("asks", "worker", ["ask delete build/", "say asked"], repo,
                                               permissions="deny")])
                asked = output(ask, "asks")
                expect.that(asked.get("permissions", [{}])[0].get("answer") == "deny", f"permissions: {asked}")
                lines = open(asked["transcript"]["path"]).read()
                expect.that("permission_response" in lines and "delete build/: deny" in lines,
                            "the answer did not reach the agent")
                expect.section("permissions: deny answers a permission request at once on the agent's stdin, logged")

                held = run(daemon, "ask", [step("asks", "worker", ["ask delete build/", "say asked"], repo)])
                pending = held.get("pending_decisions") or [{}]
                question = pending[0].get("id", "")
                expect.that(held.get("status") == "suspended" and question.startswith("asks.ask.")
                            and "delete build/" in pending[0].get("context", {}).get("prompt", ""),
                            f"opcode.run while the agent asks: {json.dumps(held)[:2000]}")
                expect.that(call(daemon, "opcode.query", {"resource": "workflows", "filter": {
                    "status": "active"}})["total"] >= 1, "the asking run is not active in the store")
                answered = call(daemon, "opcode.signal", {"workflow_id": held["workflow_id"], "signal_type": "decision",
                                                          "step_id": question, "payload": {"choice": "allow"},
                                                          "agent_id": "reviewer", "include": ["outputs"]})
                told = output(answered, "asks")
                expect.that(answered.get("status") == "completed"
                            and told.get("permissions", [{}])[0].get("answer") == "allow",
                            f"after the answer: {json.dumps(answered)[:2000]}")
                expect.that("delete build/: allow" in open(told["transcript"]["path"]).read(),
                            "the allow did not reach the agent")
                logged = call(daemon, "opcode.query", {"resource": "decisions", "filter": {
                    "workflow_id": held["workflow_id"], "status": "all"}})["decisions"]
                expect.that([(d["status"], d.get("resolved_by")) for d in logged] == [("resolved", "reviewer")],
                            f"the decision's record: {logged}")
                expect.section("a permission request is a decision of the run: opcode.run returns it, "
                               "opcode.signal answers it, the agent gets the answer, the log keeps it")

                started = call(daemon, "opcode.run", {"template_name": "ask", "wait": False})
                question = until_decision(daemon, started["workflow_id"])
                status, _ = panel_post(daemon, "/decisions/resolve", {
                    "workflow_id": started["workflow_id"], "decision": question, "choice": "allow"})
                done = until_ended(daemon, started["workflow_id"])
                expect.that(status == 303 and output(done, "asks").get("permissions", [{}])[0].get("answer") == "allow",
                            f"answered from the panel ({status}): {json.dumps(done)[:2000]}")
                expect.section("a permission request answered from the panel")

                tasks = Authorized(f"{daemon.url}/mcp", "2026-07-28",
                                   {"extensions": {"io.modelcontextprotocol/tasks": {}}})
                created, _ = tasks.call("tools/call", {"name": "opcode.run", "arguments": {"template_name": "ask"}})
                task = until_task(tasks, created["taskId"], "input_required")
                (question, form), = task["inputRequests"].items()
                tasks.call("tasks/update", {"taskId": created["taskId"], "inputResponses": {
                    question: {"action": "accept", "content": {"choice": "allow"}}}})
                task = until_task(tasks, created["taskId"], "completed")
                permissions = output(call(daemon, "opcode.status", {"workflow_id": created["taskId"],
                                                                     "include": ["outputs"]}), "asks")["permissions"]
                expect.that(question.startswith("asks.ask.") and "delete build/" in form["params"]["message"]
                            and form["params"]["requestedSchema"]["properties"]["choice"]["enum"] == ["allow", "deny"],
                            f"the task's input request: {task}")
                expect.that([p["answer"] for p in permissions] == ["allow"], f"the task's result: {task}")
                expect.section("a permission request answered as an MCP task's input (tasks/update)")

                call(daemon, "opcode.define", {"name": "ask", "definition": {"steps": [
                    step("asks", "worker", ["ask delete build/", "say asked"], repo, permission_timeout="1s")]}})
                started = call(daemon, "opcode.run", {"template_name": "ask", "wait": False})
                done = until_ended(daemon, started["workflow_id"])
                gone = call(daemon, "opcode.query", {"resource": "decisions", "filter": {
                    "workflow_id": started["workflow_id"], "status": "all"}})["decisions"]
                expect.that(output(done, "asks").get("permissions", [{}])[0].get("answer") == "deny"
                            and [d["status"] for d in gone] == ["timed_out"], f"unanswered: {done} {gone}")
                expect.section("an unanswered permission request is denied at its timeout")

                secret = run(daemon, "secret", [step("key", "scout", ["env API_KEY", "run echo $API_KEY"], repo,
                                                      env={"API_KEY": "${{secrets.API}}"})])
                told = output(secret, "key")
                stored = open(told["transcript"]["path"]).read()
                expect.that(told.get("summary", "").startswith("API_KEY=") and API not in json.dumps(secret),
                            f"the secret in the result: {told}")
                expect.that(API not in stored and stored.count("API_KEY=") >= 1, "the secret in the transcript")
                expect.section("a secret passed to the agent is masked in its result and its transcript")

                slow = call(daemon, "opcode.define", {"name": "slow", "definition": {"steps": [
                    step("fix", "worker", ["write src/slow.txt begun", "sleep 3", "write src/slow.txt done",
                                           "say finished"], repo)]}})
                started = call(daemon, "opcode.run", {"template_name": "slow", "wait": False})
                expect.that(until_running(f"{base}/agent.py"), "the slow agent never started")
                time.sleep(0.5)
                daemon.kill()
                time.sleep(0.5)
                survivors = processes_running(f"{base}/agent.py")
                daemon.start()
                status = {}
                for _ in range(150):
                    status = call(daemon, "opcode.status", {"workflow_id": started["workflow_id"],
                                                             "include": ["outputs"]})
                    if status.get("status") in ("completed", "failed"):
                        break
                    time.sleep(0.2)
                redone = output(status, "fix")
                expect.that("version" in slow and status.get("status") == "completed"
                            and redone.get("summary") == "finished", f"after kill -9: {json.dumps(status)[:2000]}")
                expect.that(open(f"{repo}/src/slow.txt").read() == "done\n", "the step did not run again")
                expect.that(not survivors, f"the agent outlived its daemon: {survivors}")
                expect.section("kill -9 during an agent step: the agent dies with it, the step runs again at start")

                call(daemon, "opcode.define", {"name": "ask", "definition": {"steps": [
                    step("asks", "worker", ["ask touch first", "ask touch second", "say both asked"], repo)]}})
                started = call(daemon, "opcode.run", {"template_name": "ask", "wait": False})
                run_id = started["workflow_id"]
                first = until_decision(daemon, run_id)
                call(daemon, "opcode.signal", {"workflow_id": run_id, "signal_type": "decision", "step_id": first,
                                               "payload": {"choice": "allow"}, "wait": False})
                second = until_decision(daemon, run_id, besides=first)
                daemon.kill()
                time.sleep(0.5)
                survivors = processes_running(f"{base}/agent.py")
                daemon.start()
                replayed = until_event(daemon, run_id, "decision_replayed")
                again = until_decision(daemon, run_id, besides=first)
                call(daemon, "opcode.signal", {"workflow_id": run_id, "signal_type": "decision", "step_id": second,
                                               "payload": {"choice": "deny"}, "wait": False})
                done = until_ended(daemon, run_id)
                answers = [p.get("answer") for p in output(done, "asks").get("permissions", [])]
                expect.that(not survivors, f"the agent outlived its daemon: {survivors}")
                expect.that(again == second and len(replayed) == 1, f"after kill -9: {again} {second} {replayed}")
                expect.that(done.get("status") == "completed" and answers == ["allow", "deny"],
                            f"the re-run's answers: {json.dumps(done)[:2000]}")
                expect.section("kill -9 while an agent waits for permission: the step runs again, the earlier "
                               "answer is replayed from the log, the open question is asked again")

                with tempfile.TemporaryDirectory() as other_home:
                    other = operator_daemon(binary, other_home, settings=settings(base),
                                            log=f"{other_home}/daemon.log")
                    try:
                        call(daemon, "opcode.define", {"name": "slow", "definition": {"steps": [
                            step("fix", "worker", ["sleep 3", "say mine"], repo)]}})
                        held = call(daemon, "opcode.run", {"template_name": "slow", "wait": False})
                        expect.that(until_running(f"{base}/agent.py"), "the first worker never started")
                        theirs = run(other, "worker", [step("fix", "worker", ["say theirs"], repo)])
                        error = theirs["steps"]["fix"].get("error") or {}
                        expect.that(error.get("code") == "R0132" and "(process" in error.get("message", ""),
                                    f"a second daemon's worker: {json.dumps(theirs)[:2000]}")
                        for _ in range(100):
                            if call(daemon, "opcode.status", {"workflow_id": held["workflow_id"]})["status"] != "active":
                                break
                            time.sleep(0.1)
                        again = run(other, "worker", [step("fix", "worker", ["say theirs"], repo)])
                        expect.that(output(again, "fix").get("summary") == "theirs", f"after the first: {again}")
                    finally:
                        other.terminate()
                expect.section("two daemons on one host: one writer per worktree between them too")

                chat = f"chat-{nonce}"
                said = run(daemon, "session", [step("talk", "scout", ["say the password is swordfish"], repo,
                                                    session=chat)])
                later = run(daemon, "session", [step("talk", "scout", ["recall swordfish"], repo, session=chat)])
                stranger = run(daemon, "session", [step("talk", "scout", ["recall swordfish"], repo,
                                                        session=f"other-{nonce}")])
                brief = run(daemon, "session", [step("talk", "scout", ["recall swordfish"], repo, session=chat,
                                                     history=0)])
                heard, forgot, squeezed = (output(r, "talk") for r in (later, stranger, brief))
                expect.that(output(said, "talk").get("session", {}).get("turns") == 0, f"first turn: {said}")
                expect.that(heard.get("summary") == "recalled swordfish" and heard["session"]["turns"] == 1,
                            f"the next turn of the session: {heard}")
                expect.that(forgot.get("summary") == "forgot swordfish", f"another session: {forgot}")
                expect.that(squeezed.get("summary") == "recalled swordfish" and squeezed["session"]["compacted"]
                            and squeezed["session"]["turns"] == 0, f"history 0, compacted: {squeezed}")
                expect.section("session memory: a later turn gets the earlier ones, bounded, other sessions not")

                call(daemon, "opcode.define", {"name": "chat", "definition": {"steps": [
                    step("talk", "scout", ["say the tide turns at noon"], repo),
                    {"id": "where", "action": "workflow.log", "depends_on": ["talk"],
                     "params": {"message": "session ${{workflow.session_id}}"}}]}})
                first = call(daemon, "opcode.run", {"template_name": "chat", "session_id": f"run-{nonce}"})
                call(daemon, "opcode.define", {"name": "chat", "definition": {"steps": [
                    step("talk", "scout", ["recall tide"], repo)]}})
                second = call(daemon, "opcode.run", {"template_name": "chat", "session_id": f"run-{nonce}",
                                                     "include": ["outputs"]})
                alone = call(daemon, "opcode.run", {"template_name": "chat", "include": ["outputs"]})
                named = call(daemon, "opcode.query", {"resource": "events", "filter": {
                    "workflow_id": first["workflow_id"], "event_type": "step_started", "step_id": "where"}})
                expect.that(first.get("status") == "completed"
                            and output(second, "talk").get("summary") == "recalled tide"
                            and output(second, "talk").get("session", {}).get("id") == f"run-{nonce}",
                            f"a run's session_id: {json.dumps(second)[:1500]}")
                expect.that(output(alone, "talk").get("summary") == "forgot tide", f"without a session: {alone}")
                expect.that(f"session run-{nonce}" in json.dumps(named), f"workflow.session_id: {named}")
                refused = call(daemon, "opcode.run", {"template_name": "chat", "session_id": "../etc"})
                expect.that("R0122" in json.dumps(refused), f"a session_id that names a path: {refused}")
                expect.section("a run's session_id: its agent steps share the session's turns; "
                               "workflow.session_id reads it")

                example = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                                      "delegated-change", "workflow.json")))
                call(daemon, "opcode.define", {k: example[k] for k in ("name", "description", "input_schema",
                                                                        "definition")})
                flow = call(daemon, "opcode.run", {"template_name": "delegated-change", "include": ["outputs"],
                                                   "params": {"repo": repo, "change": "write src/app.txt v3",
                                                              "test_command": "grep -q v3 src/app.txt"}})
                waiting = flow.get("status") == "suspended"
                kept = call(daemon, "opcode.signal", {"workflow_id": flow["workflow_id"], "signal_type": "decision",
                                                      "step_id": "approve", "payload": {"choice": "keep"},
                                                      "include": ["outputs"]})
                steps = kept.get("steps", {})
                expect.that(waiting and kept.get("status") == "completed", f"the example: {json.dumps(kept)[:2000]}")
                expect.that(open(f"{repo}/src/app.txt").read() == "v3\n", "the worker's change is not there")
                expect.that((steps.get("test", {}).get("output") or {}).get("commands", [{}])[0].get("exit_code") == 0,
                            f"the runner's test: {steps.get('test')}")
                expect.that((steps.get("investigate", {}).get("output") or {}).get("files_changed") == [],
                            f"the scout changed files: {steps.get('investigate')}")
                expect.section("examples/delegated-change: scout, worker, runner, then a person keeps the change")

                refused = call(daemon, "opcode.define", {"name": "tight", "definition": {"steps": [
                    step("fix", "worker", ["say x"], repo, max_steps=2)]}})
                expect.that("E0057" in json.dumps(refused), f"an impossible budget was defined: {refused}")
                expect.section("an impossible budget is refused when the workflow is defined (E0057)")

                registry_steps.check(expect, binary, home, daemon, repo)
            finally:
                daemon.terminate()
                if expect.failed or expect.current:
                    print(open(f"{home}/daemon.log").read()[-4000:])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
