"""Run trees and large definitions against ONE daemon (spec/limits.md,
"Run trees"): a template that runs itself, one that runs itself twice,
nested loops of a million instances, define of a 21,875-step chain (JSON)
and a 25,000-step `.opc`, a cancel of a tree, and a kill -9 while a tree
grows. Each ends as a coded failure of its own run (R0130 naming the
bound), the daemon stays small and answering, and after the kill it starts
and serves again within seconds, the tree ended.

Usage: python trees.py PATH_TO_OPCODE
"""

import json
import os
import sys
import tempfile
import time

from common import Expectations, call, daemon, get, within

SETTINGS = {"limits": {"run_tree": 300, "step_instances": 20000, "loop_iterations": 5000}}


def define(d, name, steps, **extra):
    return call(d, "opcode.define", {"name": name, "definition": {"steps": steps, **extra}})


def runs(d, **filter):
    answer = call(d, "opcode.query", {"resource": "workflows", "filter": filter, "limit": 1000})
    return answer.get("workflows") or []


def limit_of(result):
    text = json.dumps(result)
    return [bound for bound in ("run_depth", "run_tree", "step_instances") if bound in text]


def rss_mb(d):
    line = [line for line in open(f"/proc/{d.process.pid}/status") if line.startswith("VmRSS")][0]
    return int(line.split()[1]) // 1024


def large_definitions(expect, d):
    n = 21875
    chain = [{"id": "s0", "action": "crypto.uuid"}] + [
        {"id": f"s{i}", "action": "crypto.uuid", "depends_on": [f"s{i - 1}"]} for i in range(1, n)]
    result = define(d, "chain", chain)
    expect.that(result.get("version") == "v1", f"a {n}-step chain: {json.dumps(result)[:400]}")
    opc = "\n".join(["step s0 crypto.uuid"] + [f"step s{i} crypto.uuid after s{i - 1}" for i in range(1, 25000)])
    result = call(d, "opcode.define", {"name": "chain-opc", "definition": opc})
    expect.that(result.get("version") == "v1", f"a 25,000-step .opc: {json.dumps(result)[:400]}")
    expect.that(d.process.poll() is None, "the daemon died defining long chains")
    expect.section("define of a 21,875-step JSON chain and a 25,000-step .opc: stored, the daemon lives")


def recursion(expect, d):
    refused = define(d, "itself", [{"id": "again", "action": "workflow.run", "params": {"template_name": "itself"}}])
    codes = [x.get("code") for x in (refused.get("error", {}).get("details") or {}).get("diagnostics", [])]
    expect.that("E0058" in codes, f"a template that always runs itself is defined: {json.dumps(refused)[:400]}")
    expect.section("a template that starts itself on every run is refused at define (E0058)")
    # A condition the checker cannot see through: the budgets hold at run time.
    define(d, "itself", [{"id": "again", "action": "workflow.run", "condition": "true",
                          "params": {"template_name": "itself"}}])
    result = call(d, "opcode.run", {"template_name": "itself"}, timeout=300)
    expect.that(result.get("status") == "failed" and "R0130" in json.dumps(result),
                f"a template running itself: {json.dumps(result)[:600]}")
    tree = runs(d, template_name="itself")
    expect.that(len(tree) == 17, f"the tree of `itself` has {len(tree)} runs, not the root and 16 levels")
    longest = max(len(r["id"]) for r in tree) if tree else 0
    expect.that(longest <= 53, f"an id of {longest} characters")
    expect.that(all(r["status"] == "failed" for r in tree), f"left running: {tree}")
    expect.section("a template that runs itself fails at limits.run_depth (R0130); ids stay 53 characters")

    define(d, "twice", [{"id": "left", "action": "workflow.run", "condition": "true",
                         "params": {"template_name": "twice"}},
                        {"id": "right", "action": "workflow.run", "condition": "true",
                         "params": {"template_name": "twice"}}])
    result = call(d, "opcode.run", {"template_name": "twice"}, timeout=300)
    expect.that(result.get("status") == "failed", f"a template running itself twice: {json.dumps(result)[:600]}")
    ended = within(lambda: all(r["status"] in ("failed", "cancelled", "completed")
                               for r in runs(d, template_name="twice")), 60)
    tree = runs(d, template_name="twice")
    expect.that(ended and len(tree) <= 301, f"the tree of `twice`: {len(tree)} runs, ended {bool(ended)}")
    expect.that(rss_mb(d) < 600, f"the daemon's RSS is {rss_mb(d)} MB")
    expect.section("a template that runs itself twice stops at limits.run_tree; every run of its tree ends")


def nested_loops(expect, d):
    thousand = list(range(1000))
    define(d, "million", [{"id": "outer", "type": "loop", "config": {"over": "inputs.rows", "body": [
        {"id": "inner", "type": "loop", "config": {"over": "inputs.rows", "body": [
            {"id": "cell", "action": "workflow.log", "params": {"message": "x", "level": "debug"}}]}}]}}],
           input_schema={"type": "object", "properties": {"rows": {"type": "array"}}})
    result = call(d, "opcode.run", {"template_name": "million", "params": {"rows": thousand}}, timeout=300)
    expect.that(result.get("status") == "failed" and limit_of(result) == ["step_instances"],
                f"1000 x 1000: {json.dumps(result)[:600]}")
    expect.that(rss_mb(d) < 600, f"the daemon's RSS is {rss_mb(d)} MB")
    expect.section("nested loops of a million instances fail at limits.step_instances (R0130); the daemon stays small")


def cancel_reaches_descendants(expect, d):
    define(d, "waits", [{"id": "w", "type": "wait", "config": {"signal": "go"}}])
    define(d, "middle", [{"id": "inner", "action": "workflow.run", "params": {"template_name": "waits"}}])
    define(d, "fan", [{"id": "each", "action": "workflow.map",
                       "params": {"template_name": "middle", "items": [1, 2, 3]}}])
    started = call(d, "opcode.run", {"template_name": "fan", "wait": False})
    root = started["workflow_id"]
    grown = within(lambda: len(runs(d, template_name="waits")) == 3, 60)
    expect.that(grown, "the tree did not grow")
    call(d, "opcode.signal", {"workflow_id": root, "signal_type": "cancel", "payload": {"reason": "enough"}})
    every = lambda: runs(d, template_name="waits") + runs(d, template_name="middle")  # noqa: E731
    done = within(lambda: all(r["status"] == "cancelled" for r in every()), 30)
    expect.that(done and len(every()) == 6, f"left running: {[(r['id'], r['status']) for r in every()]}")
    expect.section("a cancel reaches every descendant (workflow.run and workflow.map, two levels)")


def killed_while_growing(expect, binary, home, d):
    define(d, "grows", [{"id": "left", "action": "workflow.run", "condition": "true",
                         "params": {"template_name": "grows"}},
                        {"id": "right", "action": "workflow.run", "condition": "true",
                         "params": {"template_name": "grows"}}])
    call(d, "opcode.run", {"template_name": "grows", "wait": False})
    within(lambda: len(runs(d, template_name="grows")) > 40, 60)
    d.kill()
    began = time.monotonic()
    d = daemon(binary, home, SETTINGS, port=d.port)
    serving = within(lambda: get(d, "/livez")[0] == 200, 30)
    took = time.monotonic() - began
    print(f"  serving again {took:.1f} s after the kill")
    expect.that(serving and took < 30, f"the daemon did not serve within 30 s of its restart ({took:.1f} s)")
    ended = within(lambda: all(r["status"] in ("failed", "cancelled", "completed")
                               for r in runs(d, template_name="grows")), 120)
    tree = runs(d, template_name="grows")
    expect.that(ended and len(tree) <= 301, f"after the kill, the tree of `grows`: {len(tree)} runs, ended {bool(ended)}")
    expect.section("killed -9 while a tree grows: serving again within seconds, and the tree ends")
    return d


def output_budget(expect, binary):
    """A run taking in output after output is stopped at its budget of
    output bytes (limits.run_outputs), however its steps are sized."""
    with tempfile.TemporaryDirectory() as home:
        d = daemon(binary, home, {"limits": {"run_outputs": "8MiB"}})
        try:
            megabyte = "head -c 1000000 /dev/zero | tr '\\0' x"
            define(d, "hoard", [{"id": "each", "type": "loop", "config": {"over": "inputs.rows", "body": [
                {"id": "fill", "action": "shell.exec", "params": {"command": "sh", "args": ["-c", megabyte]}}]}}],
                   input_schema={"type": "object", "properties": {"rows": {"type": "array"}}})
            result = call(d, "opcode.run", {"template_name": "hoard", "params": {"rows": list(range(30))}},
                          timeout=300)
            text = json.dumps(result)
            expect.that(result.get("status") == "failed" and "run_outputs" in text,
                        f"30 outputs of 1 MB under an 8 MiB budget: {text[:600]}")
            expect.that(rss_mb(d) < 600, f"the daemon's RSS is {rss_mb(d)} MB")
            signal_flood(expect, d)
        finally:
            d.terminate()
    expect.section("outputs past a run's budget (limits.run_outputs) fail the run with R0130; the daemon stays small")


def signal_flood(expect, d):
    """A signal's payload stays in the run's log and state: it counts against
    the run's budget (8 MiB here), and one with no room is refused."""
    define(d, "listens", [{"id": "hold", "type": "wait", "config": {"signal": "go"}}])
    root = call(d, "opcode.run", {"template_name": "listens", "wait": False})["workflow_id"]
    within(lambda: call(d, "opcode.status", {"workflow_id": root}).get("status") == "suspended", 30)
    big = call(d, "opcode.signal", {"workflow_id": root, "signal_type": "signal",
                                    "payload": {"name": "go", "data": {"text": "x" * 9_000_000}}})
    expect.that(big.get("error", {}).get("code") == "R0130" and "run_outputs" in json.dumps(big),
                f"a 9 MB signal under an 8 MiB budget: {json.dumps(big)[:300]}")
    small = call(d, "opcode.signal", {"workflow_id": root, "signal_type": "signal",
                                      "payload": {"name": "go", "data": {"text": "ok"}}})
    expect.that("error" not in small, f"a small signal after the refusal: {json.dumps(small)[:300]}")
    expect.section("a signal counts against its run's budget (limits.run_outputs): one with no room is refused, R0130")


def tree_budget(expect, binary):
    """Children that each stay within their own budget of output bytes, but
    together pass their tree's (limits.tree_outputs): the tree is cancelled,
    saying R0130 and the bound, and no more children start."""
    with tempfile.TemporaryDirectory() as home:
        d = daemon(binary, home, {"limits": {"run_outputs": "8MiB", "tree_outputs": "16MiB"}})
        try:
            megabyte = {"action": "shell.exec", "params": {"command": "sh", "args": [
                "-c", "head -c 1000000 /dev/zero | tr '\\0' x"]}}
            define(d, "three", [{"id": "a", **megabyte}, {"id": "b", **megabyte}, {"id": "c", **megabyte}],
                   output={"ok": True})
            define(d, "fleet", [{"id": "each", "action": "workflow.map", "params": {
                "template_name": "three", "items": list(range(40)), "max_concurrency": 2}}],
                   output={"done": True})
            result = call(d, "opcode.run", {"template_name": "fleet"}, timeout=300)
            root = result.get("workflow_id")
            status = call(d, "opcode.status", {"workflow_id": root}) if root else result
            text = json.dumps(status)
            expect.that(status.get("status") == "cancelled" and "tree_outputs" in text and "R0130" in text,
                        f"40 children of 3 MB each under a 16 MiB tree budget: {text[:600]}")
            children = runs(d, template_name="three")
            expect.that(len(children) < 10, f"{len(children)} children started past the tree's budget")
            done = within(lambda: all(r["status"] != "active" for r in runs(d, template_name="three")), 30)
            expect.that(done, "children still active after their tree was cancelled")
            expect.that(rss_mb(d) < 600, f"the daemon's RSS is {rss_mb(d)} MB")
        finally:
            d.terminate()
    expect.section("children within their own budgets but past their tree's (limits.tree_outputs): "
                   "the tree is cancelled with R0130, no more children start")


def serves_while_recovering(expect, binary):
    """Killed -9 with 1,500 runs of a tree active, the daemon answers at once
    after its restart, while it is still resuming them."""
    with tempfile.TemporaryDirectory() as home:
        d = daemon(binary, home, {"limits": {"run_tree": 3000}})
        try:
            define(d, "grows", [{"id": "left", "action": "workflow.run", "condition": "true",
                                 "params": {"template_name": "grows"}},
                                {"id": "right", "action": "workflow.run", "condition": "true",
                                 "params": {"template_name": "grows"}}])
            call(d, "opcode.run", {"template_name": "grows", "wait": False})
            total = lambda: call(d, "opcode.query", {"resource": "workflows", "limit": 1})["total"]  # noqa: E731
            grown = within(lambda: total() >= 1500, 120)
            expect.that(grown, "the tree did not grow to 1,500 runs")
            d.kill()
            before = os.path.getsize(f"{home}/daemon.log")

            def resumed():
                with open(f"{home}/daemon.log") as log:
                    log.seek(before)
                    return "resumed interrupted workflows" in log.read()
            began = time.monotonic()
            d = daemon(binary, home, {"limits": {"run_tree": 3000}}, port=d.port)
            answered = within(lambda: get(d, "/livez")[0] == 200 and total() > 0, 60)
            took = time.monotonic() - began
            print(f"  answering {took:.1f} s after the kill")
            expect.that(answered and not resumed(),
                        f"the daemon answered only after resuming its runs ({took:.1f} s)")
            resumed = within(resumed, 300)
            expect.that(resumed, "the runs were not resumed")
        finally:
            if d.process.poll() is None:
                d.terminate()
    expect.section("killed -9 with a large tree active: answering at once, resuming it meanwhile")


def main(binary):
    expect = Expectations()
    with tempfile.TemporaryDirectory() as home:
        d = daemon(binary, home, SETTINGS)
        try:
            large_definitions(expect, d)
            recursion(expect, d)
            nested_loops(expect, d)
            cancel_reaches_descendants(expect, d)
            d = killed_while_growing(expect, binary, home, d)
        finally:
            if d.process.poll() is None:
                d.terminate()
        expect.that(os.stat(f"{home}/opcode.db").st_mode & 0o777 == 0o600, "the database is not 0600")
        expect.section("the database was created 0600")
    output_budget(expect, binary)
    tree_budget(expect, binary)
    serves_while_recovering(expect, binary)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
