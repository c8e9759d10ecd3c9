"""Secrets never reach the store or any surface in plain text: a parent
passes two vault secrets (one ASCII with quotes, one non-ASCII) to child
runs through `workflow.run` and `workflow.map`; the children use them,
print them (JSON, ASCII-escaped JSON), embed them in text and write one to
a file; the parent reads the file back. Then every spelling the redactor
claims (raw, JSON-escaped, ASCII-escaped in both cases) is counted over
the database and its WAL, the daemon's debug log, every MCP result, the
panel's pages, the AG-UI streams and /metrics: each count must be 0.

Usage: python leaks.py PATH_TO_OPCODE
"""

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile

from common import VAULT_KEY, check, call, get, operator_daemon

API = 'hunter2-"q"-s3cret-' + secrets.token_hex(4)
WORD = "w\u00f6rd-\U0001f511-" + secrets.token_hex(4)

USE = {"name": "use", "input_schema": {"type": "object", "properties": {
    "token": {"type": "string"}, "word": {"type": "string"}}},
       "definition": {"steps": [
           {"id": "digest", "action": "shell.exec", "params": {
               "command": "python3", "args": ["-c", "import hashlib, os; print(hashlib.sha256("
                                                    "(os.environ['T'] + os.environ['W']).encode()).hexdigest())"],
               "env": {"T": "${{inputs.token}}", "W": "${{inputs.word}}"}}},
           {"id": "echo", "action": "shell.exec", "depends_on": ["digest"], "params": {
               "command": "python3", "args": ["-c", "import json, os; print(json.dumps({'t': os.environ['T'], "
                                                    "'w': os.environ['W']})); print(os.environ['W'])"],
               "env": {"T": "${{inputs.token}}", "W": "${{inputs.word}}"}}},
           {"id": "text", "action": "shell.exec", "depends_on": ["echo"], "params": {
               "command": "/bin/sh", "args": ["-c", "printf '%s\\n' \"$0\"", "Bearer ${{inputs.token}} and ${{inputs}}"]}},
           {"id": "save", "action": "shell.exec", "depends_on": ["text"], "params": {
               "command": "/bin/sh", "args": ["-c", "printf '%s %s' \"$T\" \"$W\" > secret.txt"],
               "env": {"T": "${{inputs.token}}", "W": "${{inputs.word}}"}}}],
           "output": {"digest": "${{steps.digest.output.stdout_raw}}", "echo": "${{steps.echo.output}}",
                      "text": "${{steps.text.output.stdout_raw}}", "token": "${{inputs.token}}"}}}

PASS = {"name": "pass", "definition": {"steps": [
    {"id": "one", "action": "workflow.run", "params": {
        "template_name": "use", "params": {"token": "${{secrets.API}}", "word": "${{secrets.WORD}}"}}},
    {"id": "many", "action": "workflow.map", "depends_on": ["one"], "params": {
        "template_name": "use", "items": ["${{secrets.API}}", "plain"], "item_param": "token",
        "params": {"word": "${{secrets.WORD}}"}, "max_concurrency": 1}},
    {"id": "readback", "action": "fs.read", "depends_on": ["many"], "params": {"path": "secret.txt"}},
    {"id": "cat", "action": "shell.exec", "depends_on": ["readback"],
     "params": {"command": "cat", "args": ["secret.txt"]}},
    {"id": "ascii", "action": "shell.exec", "depends_on": ["cat"], "params": {
        "command": "python3", "args": ["-c", "import json; print(json.dumps(open('secret.txt').read()))"]}}],
    "output": {"one": "${{steps.one.output}}", "read": "${{steps.readback.output.content}}"}}}


def spellings(value):
    """Every spelling of `value` the redactor claims to mask."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    ascii_lower = json.dumps(value)[1:-1]
    ascii_upper = ascii_lower
    for i in range(len(ascii_lower)):
        if ascii_lower.startswith("\\u", i):
            ascii_upper = ascii_upper[:i + 2] + ascii_lower[i + 2:i + 6].upper() + ascii_upper[i + 6:]
    return {value, escaped, ascii_lower, ascii_upper}


def count(haystack, what):
    if isinstance(haystack, bytes):
        return sum(haystack.count(s.encode()) for s in what)
    return sum(haystack.count(s) for s in what)


def main(binary):
    forms = spellings(API) | spellings(WORD)
    with tempfile.TemporaryDirectory() as home:
        db = f"{home}/opcode.db"
        for name, value in [("API", API), ("WORD", WORD)]:
            subprocess.run([binary, "secret", "set", name, "--db", db], input=value, text=True, check=True,
                           env=dict(os.environ, OPCODE_VAULT_KEY=VAULT_KEY), capture_output=True)
        log = f"{home}/daemon.log"
        daemon = operator_daemon(binary, home, env={"OPCODE_LOG_LEVEL": "debug"}, log=log)
        found = {}
        try:
            results = []
            for template in [USE, PASS]:
                results.append(call(daemon, "opcode.define", template))
                check("version" in results[-1], f"define {template['name']}: {results[-1]}")
            run = call(daemon, "opcode.run", {"template_name": "pass", "include": ["outputs", "events", "inputs"]})
            results.append(run)
            check(run["status"] == "completed", f"pass: {json.dumps(run)[:3000]}")
            steps = run["steps"]
            digest = hashlib.sha256((API + WORD).encode()).hexdigest()
            check(run["output"]["one"]["output"]["digest"].strip() == digest,
                  f"the child did not get the secrets' values: {run['output']['one']}")
            many = steps["many"]["output"]["outputs"]
            check(many[0]["digest"].strip() == digest, f"workflow.map's child 0: {many[0]}")
            check(many[1]["digest"].strip() == hashlib.sha256(("plain" + WORD).encode()).hexdigest(),
                  f"workflow.map's child 1: {many[1]}")
            print("ok - children get the secrets' values at their dispatch, from workflow.run and workflow.map")
            child = run["output"]["one"]["output"]
            check(child["echo"]["stdout"].startswith('{"t": "[REDACTED]", "w": "[REDACTED]"}'), f"echo: {child}")
            check("Bearer [REDACTED] and" in child["text"] and child["token"] == "${{secrets.API}}", f"text: {child}")
            # The map's children write the file one after the other (two at
            # once could interleave their writes, leaving a fragment of a
            # secret no redactor can know): the last was given the API
            # secret or "plain".
            masked = {"[REDACTED] [REDACTED]", "plain [REDACTED]"}
            check(steps["readback"]["output"]["content"] in masked, f"read: {steps['readback']}")
            check(steps["cat"]["output"]["stdout_raw"] in masked, f"cat: {steps['cat']}")
            check(steps["ascii"]["output"]["stdout"] in masked, f"ascii: {steps['ascii']}")
            print("ok - a secret written by one step and read back by another is masked; ASCII-escaped too")

            ids = [run["workflow_id"]]
            kids = call(daemon, "opcode.query", {"resource": "workflows",
                                                 "filter": {"parent_workflow_id": run["workflow_id"]}})
            ids += [k["id"] for k in kids["workflows"]]
            check(len(ids) == 4, f"runs: {ids}")
            results.append(kids)
            for workflow_id in ids:
                results.append(call(daemon, "opcode.status", {"workflow_id": workflow_id, "include": ["outputs", "events", "inputs"]}))
                results.append(call(daemon, "opcode.query", {"resource": "events", "limit": 1000,
                                                             "filter": {"workflow_id": workflow_id}}))
            results.append(call(daemon, "opcode.query", {"resource": "workflows", "limit": 100}))
            found["MCP results"] = count(json.dumps(results, ensure_ascii=False), forms) + count(
                json.dumps(results), forms)
            pages = ["/", "/workflows", "/events", "/decisions", "/templates", "/templates/use",
                     "/templates/pass", "/agents", "/secrets", "/scheduler"]
            pages += [f"/workflows/{workflow_id}" for workflow_id in ids]
            html = ""
            for page in pages:
                status, body = get(daemon, page, headers={"Accept": "text/html"})
                check(status == 200, f"{page}: {status}")
                html += body
            found["panel HTML"] = count(html, forms)
            streams = "".join(get(daemon, f"/api/runs/{workflow_id}/ag-ui")[1] for workflow_id in ids)
            check("RUN_FINISHED" in streams, "no AG-UI run finished")
            found["AG-UI streams"] = count(streams, forms)
            found["/metrics"] = count(get(daemon, "/metrics")[1], forms)
        finally:
            daemon.terminate()
        with open(log) as f:
            found["debug log"] = count(f.read(), forms)
        for suffix in ["", "-wal", "-shm"]:
            if os.path.exists(db + suffix):
                with open(db + suffix, "rb") as f:
                    found[f"opcode.db{suffix}"] = count(f.read(), forms)
    leaks = {where: n for where, n in found.items() if n}
    check(not leaks, f"plaintext secrets found: {leaks}")
    print(f"ok - 0 plaintext secrets in any spelling across {', '.join(found)}")


if __name__ == "__main__":
    main(sys.argv[1])
