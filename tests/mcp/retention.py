"""Retention through the real daemon (spec/store.md, "Retention"): with
`retention: {keep_last, export, every}` the daemon prunes a template's
older finished runs, each exported first as `opcode export` writes it;
a pruned run answers R0133 with its tombstone in opcode.status and
opcode.signal, opcode.query lists it as `pruned`, the panel's page says
410 Gone; tombstones outlive a restart; an export that cannot be written
keeps the run; a bad block is refused at start.

Usage: python retention.py PATH_TO_OPCODE
"""

import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request

from daemon import Daemon, free_port
from raw import Session

HASH = {"steps": [{"id": "h", "action": "crypto.hash",
                   "params": {"data": "${{inputs.n}}", "algorithm": "sha256"}}]}


def settings(home, retention):
    os.makedirs(f"{home}/.opcode", exist_ok=True)
    with open(f"{home}/.opcode/settings.json", "w") as f:
        json.dump({"retention": retention}, f)


def tool(session, name, arguments):
    result, _ = session.call("tools/call", {"name": name, "arguments": arguments})
    return result


def ok(session, name, arguments):
    result = tool(session, name, arguments)
    assert not result.get("isError"), f"{name}: {result}"
    return result["structuredContent"]


def error(session, name, arguments):
    result = tool(session, name, arguments)
    assert result.get("isError"), f"{name} should fail: {result}"
    return json.loads(result["content"][0]["text"])["error"]


def runs(session, template, count):
    return [ok(session, "opcode.run", {"template_name": template, "params": {"n": str(n)}})["workflow_id"]
            for n in range(count)]


def pruned(session, total, seconds=15):
    """The pruned runs once there are `total` of them."""
    deadline = time.time() + seconds
    while True:
        page = ok(session, "opcode.query", {"resource": "pruned", "limit": 100})
        if page["total"] >= total or time.time() > deadline:
            assert page["total"] == total, f"pruned: {page}"
            return page["pruned"]
        time.sleep(0.2)


def panel_status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def prunes_and_says_so(binary):
    with tempfile.TemporaryDirectory() as home:
        settings(home, {"keep_last": 2, "export": True, "every": "1s"})
        daemon = Daemon(binary, home, free_port(), log=f"{home}/daemon.log")
        daemon.start()
        try:
            session = Session(f"{daemon.url}/mcp", "2026-07-28")
            ok(session, "opcode.define", {"name": "keep", "definition": HASH})
            ok(session, "opcode.define", {"name": "other", "definition": HASH})
            kept_runs = runs(session, "keep", 5)
            other = runs(session, "other", 1)
            gone = pruned(session, 3)
            assert sorted(p["workflow_id"] for p in gone) == sorted(kept_runs[:3]), gone
            left = ok(session, "opcode.query", {"resource": "workflows", "filter": {"template_name": "keep"}})
            assert sorted(w["workflow_id"] if "workflow_id" in w else w["id"] for w in left["workflows"]) \
                == sorted(kept_runs[3:]), left
            assert ok(session, "opcode.status", {"workflow_id": other[0]})["status"] == "completed"

            first = kept_runs[0]
            said = error(session, "opcode.status", {"workflow_id": first})
            assert said["code"] == "R0133" and said["name"] == "workflow-pruned", said
            tomb = said["details"]
            assert tomb["status"] == "completed" and tomb["template_name"] == "keep", tomb
            assert tomb["export"] == f"{home}/.opcode/exports/{first}.test.json", tomb
            with open(tomb["export"]) as f:
                case = json.load(f)["cases"][0]
            assert first in case["name"] and case["expect"]["status"] == "completed", case
            assert error(session, "opcode.signal", {"workflow_id": first, "signal_type": "cancel"})["code"] == "R0133"
            assert error(session, "opcode.status", {"workflow_id": "never-was"})["code"] == "R0121"
            one = ok(session, "opcode.query", {"resource": "pruned", "filter": {"workflow_id": first}})
            assert one["total"] == 1 and one["pruned"][0]["pruned_at"] == tomb["pruned_at"], one

            status, page = panel_status(f"{daemon.url}/workflows/{first}")
            assert status == 410 and "pruned by the retention settings" in page, (status, page[:400])
            assert first in page or first[:8] in page, page[:400]
        finally:
            daemon.terminate()
        # The tombstones are in the database: a restarted daemon still says so.
        daemon.start()
        try:
            session = Session(f"{daemon.url}/mcp", "2026-07-28")
            assert error(session, "opcode.status", {"workflow_id": first})["code"] == "R0133"
        finally:
            daemon.terminate()
    print("retention: 3 of 5 runs pruned and exported, the newest 2 and the other template's kept; "
          "R0133, query, panel 410 and a restart agree")


def an_export_that_fails_keeps_the_run(binary):
    with tempfile.TemporaryDirectory() as home:
        blocker = f"{home}/not-a-folder"
        open(blocker, "w").close()
        settings(home, {"keep_last": 1, "export": blocker, "every": "1s"})
        daemon = Daemon(binary, home, free_port(), log=f"{home}/daemon.log")
        daemon.start()
        try:
            session = Session(f"{daemon.url}/mcp", "2026-07-28")
            ok(session, "opcode.define", {"name": "keep", "definition": HASH})
            ids = runs(session, "keep", 3)
            deadline = time.time() + 15
            while "its export failed" not in open(daemon.log).read():
                assert time.time() < deadline, open(daemon.log).read()[-2000:]
                time.sleep(0.2)
            assert pruned(session, 0, seconds=0) == []
            for run in ids:
                assert ok(session, "opcode.status", {"workflow_id": run})["status"] == "completed"
        finally:
            daemon.terminate()
    print("retention: an export that cannot be written keeps every run")


def a_bad_block_is_refused(binary):
    with tempfile.TemporaryDirectory() as home:
        settings(home, {"days": 0})
        daemon = Daemon(binary, home, free_port())
        try:
            daemon.start()
        except AssertionError as e:
            assert "retention `days` is at least 1" in str(e), e
        else:
            daemon.terminate()
            raise AssertionError("a retention of 0 days was taken")
    print("retention: a bad block is refused at start")


if __name__ == "__main__":
    prunes_and_says_so(sys.argv[1])
    an_export_that_fails_keeps_the_run(sys.argv[1])
    a_bad_block_is_refused(sys.argv[1])
