"""Two tenants of one daemon try to read each other (spec/security.md,
"Tenants"): acme and globex, each with its own token, define templates,
keep secrets under the same name, start runs (one waits for a decision),
then each reaches for the other's runs, decisions, templates and secrets
through every tool, the MCP resources, the panel's pages and forms, the
AG-UI streams, /metrics and its own sandbox. The operator's token sees
neither. Every cross-tenant read must fail: the count printed is 0.

Usage: python tenants.py PATH_TO_OPCODE
"""

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from common import TOKEN, VAULT_KEY, call, check, get, operator_daemon, read

TENANTS = {name: {"token": f"{name}-tok-" + secrets.token_hex(12), "secret": f"{name}-secret-" + secrets.token_hex(6)}
           for name in ("acme", "globex")}


def settings(root):
    return {"tenants": {name: {"tokens": [t["token"]]} for name, t in TENANTS.items()},
            "isolation": {"workspace_root": f"{root}/workspaces"}}


def templates(name, root):
    """A tenant's templates: one reads its secret (as a hash), one waits
    for a decision, one looks around the sandbox for the other tenant."""
    other = "globex" if name == "acme" else "acme"
    return [
        {"name": "probe", "definition": {"steps": [{"id": "hash", "action": "shell.exec", "params": {
            "command": "/bin/sh", "args": ["-c", "printf %s \"$K\" | sha256sum"],
            "env": {"K": "${{secrets.KEY}}"}}},
            {"id": "note", "action": "fs.write", "params": {"path": "note.txt", "content": name}},
            {"id": "back", "action": "fs.read", "depends_on": ["note"], "params": {"path": "note.txt"}}]}},
        {"name": f"{name}-hook", "triggers": {"webhook": {"secret": "KEY", "auth": "token"}},
         "definition": {"steps": [{"id": "noted", "action": "workflow.log", "params": {"message": "hooked"}}]}},
        {"name": f"{name}-gate", "definition": {"steps": [{"id": "approve", "type": "reasoning", "config": {
            "prompt_context": f"{name} ships?", "options": [{"id": "yes"}, {"id": "no"}]}}]}},
        {"name": f"{name}-peek", "definition": {"steps": [{"id": "look", "action": "shell.exec", "params": {
            "command": "/bin/sh", "args": ["-c", f"ls -aR {root}/tenants/{other} {root}/workspaces 2>&1; "
                                                 f"cat {root}/../tenants/{other}/opcode.db 2>&1 | head -c 300; "
                                                 f"ls -a {root}/../tenants/{other}"]}}]}},
    ]


def mcp(daemon, name, tool, arguments):
    return call(daemon, tool, arguments, token=TENANTS[name]["token"] if name else TOKEN)


def resource(daemon, name, uri):
    """resources/read as tenant `name`: the text, or None when refused."""
    try:
        return read(daemon, uri, token=TENANTS[name]["token"])
    except AssertionError:
        return None


def sign_in(daemon, token):
    """The panel's sign-in cookie for `token`, as a browser gets it."""
    body = urllib.parse.urlencode({"token": token}).encode()
    request = urllib.request.Request(f"{daemon.url}/login", data=body, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    try:
        response = urllib.request.build_opener(Keep).open(request, timeout=30)
    except urllib.error.HTTPError as e:
        response = e
    cookie = response.headers.get("Set-Cookie", "")
    check(cookie.startswith("opcode_token="), f"signing in: {response.status} {cookie}")
    return cookie.split(";")[0]


def hook(daemon, path, secret):
    """A webhook delivery with a bearer secret: (status, body)."""
    request = urllib.request.Request(f"{daemon.url}{path}", data=b'{"ping": 1}', method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main(binary):
    leaks = []

    def never(condition, what):
        if condition:
            leaks.append(what)

    # Outside /tmp, which every sandbox has its own of: what a sandbox
    # could see there is what it could see anywhere.
    with tempfile.TemporaryDirectory(dir="/var/tmp") as home:
        root = f"{home}/area"
        # The sandbox user passes through to the runs' workspaces.
        os.makedirs(root)
        for folder in (home, root):
            os.chmod(folder, 0o711)
        daemon = operator_daemon(binary, home, settings=settings(root), log=f"{home}/daemon.log")
        try:
            for name, tenant in [("acme", TENANTS["acme"]), ("globex", TENANTS["globex"]), (None, None)]:
                db = f"{home}/tenants/{name}/opcode.db" if name else f"{home}/opcode.db"
                value = tenant["secret"] if tenant else "operator-secret"
                for key in ["KEY", f"{name or 'operator'}_ONLY".upper()]:
                    subprocess.run([binary, "secret", "set", key, "--db", db], input=value, text=True, check=True,
                                   env=dict(os.environ, OPCODE_VAULT_KEY=VAULT_KEY), capture_output=True)
            runs = {}
            for name in TENANTS:
                for template in templates(name, root):
                    defined = mcp(daemon, name, "opcode.define", {**template, "agent_id": f"{name}-bot"})
                    check("version" in defined, f"{name} defines {template['name']}: {defined}")
                probe = mcp(daemon, name, "opcode.run", {"template_name": "probe", "agent_id": f"{name}-bot",
                                                          "include": ["outputs"]})
                digest = hashlib.sha256(TENANTS[name]["secret"].encode()).hexdigest()
                check(probe["status"] == "completed"
                      and probe["steps"]["hash"]["output"]["stdout"].startswith(digest)
                      and probe["steps"]["back"]["output"]["content"] == name,
                      f"{name}'s own secret: {json.dumps(probe)[:1500]}")
                gate = mcp(daemon, name, "opcode.run", {"template_name": f"{name}-gate", "agent_id": f"{name}-bot"})
                check(gate["status"] == "suspended", f"{name}'s gate: {gate}")
                peek = mcp(daemon, name, "opcode.run", {"template_name": f"{name}-peek", "include": ["outputs"]})
                runs[name] = {"probe": probe["workflow_id"], "gate": gate["workflow_id"], "peek": peek}
            print("ok - each tenant runs its templates with its own secret under the shared name KEY")

            for name, other in [("acme", "globex"), ("globex", "acme")]:
                theirs = runs[other]
                token = TENANTS[name]["token"]
                for run_id in (theirs["probe"], theirs["gate"]):
                    status = mcp(daemon, name, "opcode.status", {"workflow_id": run_id})
                    never("error" not in json.dumps(status) or "R0121" not in json.dumps(status),
                          f"{name} reads {other}'s run through opcode.status: {status}")
                    answer = mcp(daemon, name, "opcode.signal", {"workflow_id": run_id, "signal_type": "decision",
                                                                 "step_id": "approve", "payload": {"choice": "no"}})
                    never("R0121" not in json.dumps(answer), f"{name} answers {other}'s decision: {answer}")
                    cancel = mcp(daemon, name, "opcode.signal", {"workflow_id": run_id, "signal_type": "cancel"})
                    never("R0121" not in json.dumps(cancel), f"{name} cancels {other}'s run: {cancel}")
                    text = resource(daemon, name, f"opcode://runs/{run_id}/steps/hash/output")
                    never(text is not None, f"{name} reads {other}'s run resource: {str(text)[:300]}")
                    for page in (f"/workflows/{run_id}", f"/api/runs/{run_id}/ag-ui"):
                        code, body = get(daemon, page, token=token, headers={"Accept": "text/html"})
                        never(code == 200 and run_id in body and "not found" not in body.lower(),
                              f"{name} reads {other}'s {page}: {code} {body[:200]}")
                listed = json.dumps([mcp(daemon, name, "opcode.query", {"resource": resource_name, "limit": 200})
                                     for resource_name in ("workflows", "events", "templates", "decisions",
                                                           "schedules")])
                marks = [f"{other}-gate", f"{other}-bot", f"{other.upper()}_ONLY", TENANTS[other]["secret"],
                         theirs["probe"], theirs["gate"]]
                never(any(mark in listed for mark in marks), f"{name}'s listings name {other}'s: {listed[:500]}")
                started = mcp(daemon, name, "opcode.run", {"template_name": f"{other}-gate"})
                never("R0120" not in json.dumps(started), f"{name} runs {other}'s template: {started}")
                diagram = mcp(daemon, name, "opcode.diagram", {"template_name": f"{other}-gate"})
                never("R0120" not in json.dumps(diagram) and "error" not in json.dumps(diagram),
                      f"{name} draws {other}'s template: {str(diagram)[:300]}")
                pages = ""
                for page in ("/", "/workflows", "/events", "/decisions", "/templates", "/agents", "/secrets",
                             "/scheduler"):
                    code, body = get(daemon, page, token=token, headers={"Accept": "text/html"})
                    check(code == 200, f"{name} {page}: {code}")
                    pages += body
                never(any(mark in pages for mark in marks),
                      f"{name}'s panel names {other}'s: {[m for m in marks if m in pages]}")
                check(f"{name.upper()}_ONLY" in pages and f"{name}-gate" in pages, f"{name}'s own panel is empty")
                code, metrics = get(daemon, "/metrics", token=token)
                never(code != 200 or other in metrics, f"{name}'s /metrics names {other}: "
                      f"{[line for line in metrics.splitlines() if other in line][:5]}")
                check(f"{name}-gate" in metrics or f"{name}-bot" in metrics or "shell.exec" in metrics,
                      f"{name}'s /metrics says nothing of its own runs")
                seen = json.dumps(runs[name]["peek"])
                output = runs[name]["peek"]["steps"]["look"]["output"]
                shown = output["stdout_raw"] + output["stderr"]
                never(TENANTS[other]["secret"] in shown or "SQLite" in shown or "\nworkspaces\n" in shown
                      or "agent-calls" in shown or "\nopcode.db\n" in shown,
                      f"{name}'s sandbox sees {other}'s files: {seen[:1200]}")
            print("ok - neither tenant reads the other's runs, decisions, templates, secrets, pages, streams, "
                  "metrics or files")

            operator = json.dumps([call(daemon, "opcode.query", {"resource": r, "limit": 200})
                                   for r in ("workflows", "templates", "decisions")])
            never(any(run_id in operator for r in runs.values() for run_id in (r["probe"], r["gate"]))
                  or "acme" in operator or "globex" in operator, f"the operator's engine lists tenants': {operator[:300]}")
            code, _ = get(daemon, "/workflows", token="nobody-" + secrets.token_hex(12))
            never(code != 401, f"a wrong token reads the panel: {code}")
            for name in TENANTS:
                kept = mcp(daemon, name, "opcode.signal", {"workflow_id": runs[name]["gate"], "signal_type": "decision",
                                                           "step_id": "approve", "payload": {"choice": "yes"}})
                check(kept.get("status") == "completed", f"{name} answers its own decision: {kept}")
            print("ok - the operator's token sees neither tenant; a wrong token nothing; each tenant answers its own")

            for name, other in [("acme", "globex"), ("globex", "acme")]:
                cookie = sign_in(daemon, TENANTS[name]["token"])
                _, page = get(daemon, "/templates", token="", headers={"Cookie": cookie, "Accept": "text/html"})
                check(f"{name}-gate" in page and f"{other}-gate" not in page, f"{name} signed in: {page[:300]}")
                own = hook(daemon, f"/tenants/{name}/hooks/{name}-hook", TENANTS[name]["secret"])
                theirs = hook(daemon, f"/tenants/{name}/hooks/{other}-hook", TENANTS[other]["secret"])
                crossed = hook(daemon, f"/tenants/{other}/hooks/{other}-hook", TENANTS[name]["secret"])
                check(own[0] == 202, f"{name}'s webhook: {own}")
                never(theirs[0] != 404 or crossed[0] != 401,
                      f"{name} reaches {other}'s webhook: {theirs} {crossed}")
            print("ok - each tenant signs in to its own panel; its webhooks are under /tenants/<name>/hooks, "
                  "the other's neither there nor with its secret")
        finally:
            daemon.terminate()
            if leaks:
                print(open(f"{home}/daemon.log").read()[-3000:])
    print(f"cross-tenant reads: {len(leaks)}")
    check(not leaks, "\n".join(leaks))


if __name__ == "__main__":
    main(sys.argv[1])
