"""Workflows built to crash the daemon (issue: "a workflow can hurt only
itself", spec/limits.md), all sent to ONE daemon process, one after
another, while another process times `/livez` every 50 ms: each must end as
a coded diagnostic or a coded failure of its own run, the daemon must
answer `/livez` throughout (LIVEZ_BOUND_MS: a loaded machine's bound, the
slowest answer printed), and it must start again after.

Usage: python workflows.py PATH_TO_OPCODE
"""

import json
import subprocess
import sys
import tempfile
import threading
import time

from common import (LIVEZ_BOUND_MS, Expectations, LivezWatch, call, daemon, diagnostic_codes, get, rpc, wait_for, within)

RECURSE = "def f: if . > 0 then (. - 1 | f) + 1 else 0 end; f"
# CEL over 10^8 elements: eight nested comprehensions of ten.
TEN = "[0,1,2,3,4,5,6,7,8,9]"
HUNDRED_MILLION = "size(" + ".map(a, ".join([TEN] * 8) + ".map(h, h)" + ")" * 7 + ")"


def step(action, params, **extra):
    return {"id": "s", "action": action, "params": params, **extra}


def define(d, name, steps, **extra):
    return call(d, "opcode.define", {"name": name, "definition": {"steps": steps, **extra}})


def run(d, name, params=None, wait=True):
    return call(d, "opcode.run", {"template_name": name, "params": params or {}, "wait": wait,
                                  "include": ["steps"]}, timeout=180)


def step_error(result, step_id="s"):
    return ((result.get("steps") or {}).get(step_id) or {}).get("error") or {}


def jq_helpers():
    """Pids of jq and Expr evaluations still running."""
    found = subprocess.run(["pgrep", "-f", "__opcode_eval"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def refused_at_define(expect, d, what, steps, code="E0053"):
    result = define(d, what, steps)
    codes = diagnostic_codes(result)
    expect.that(result.get("error", {}).get("code") == "R0123" and code in codes,
                f"{what}: {json.dumps(result)[:600]}")


def compile_time(expect, d):
    refused_at_define(expect, d, "jq-parens", [step("json.jq", {"filter": "(" * 1000 + "." + ")" * 1000})])
    refused_at_define(expect, d, "jq-pipes", [step("json.jq", {"filter": ".|" * 2000 + "."})])
    refused_at_define(expect, d, "cel-50k-terms", [step("expr.eval", {"expression": "+".join(["1"] * 50000)})])
    refused_at_define(expect, d, "cel-10k-plus", [step("expr.eval", {"expression": "1" + "+1" * 10000})])
    refused_at_define(expect, d, "cel-100k-parens",
                      [step("expr.eval", {"expression": "(" * 100000 + "1" + ")" * 100000})])
    refused_at_define(expect, d, "expr-parens", [step("expr.eval", {
        "expression": "(" * 1000 + "1" + ")" * 1000, "language": "expr"})])
    refused_at_define(expect, d, "regex-deep",
                      [step("assert.matches", {"value": "a", "pattern": "(" * 5000 + "a" + ")" * 5000})])
    expect.section("deep and large CEL, Expr, jq and regex are E0053 at define (the daemon lives)")

    refused_at_define(expect, d, "cel-secret", [step("expr.eval", {"expression": "secrets.API_KEY + 'x'"})],
                      code="E0037")
    refused_at_define(expect, d, "context-secret",
                      [step("workflow.context", {"action": "update", "data": {"key": "${{secrets.API_KEY}}"}})],
                      code="E0037")
    expect.section("secrets in CEL and in workflow.context are refused at define (E0037)")

    text = '{"steps": [{"id": "a", "action": "expr.eval", "params": {"expression": "1"}}], "steps": []}'
    result = call(d, "opcode.define", {"name": "dup", "definition": text})
    expect.that("E0005" in diagnostic_codes(result), f"duplicate keys in a text definition: {result}")
    many = "{" + ", ".join(['"k": 1'] * 200000) + ', "steps": []}'
    result = call(d, "opcode.define", {"name": "dup-200k", "definition": many})
    expect.that(0 < len(diagnostic_codes(result)) <= 101, f"200k duplicates: {len(diagnostic_codes(result))}")
    expect.section("duplicate keys are one rule everywhere, and repeated diagnostics are counted past 100")

    result = define(d, "pids", [step("shell.exec", {"command": "true"}, isolation={"pids": 10000000})])
    message = json.dumps(result)
    expect.that("E0052" in diagnostic_codes(result) and "cannot isolate" not in message,
                f"pids 10000000: {message[:600]}")
    expect.section("a step asking for 10^7 processes is told it asks above the settings, not that the host cannot")

    deep = {"k": 1}
    for _ in range(200):
        deep = [deep]
    status, answer = rpc(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "opcode.define", "arguments": {"name": "deep", "definition": {"steps": [], "x": deep}}}})
    text = json.dumps(answer)
    expect.that(status == 400 and "128" in text and "not valid JSON" not in text, f"deep JSON: {status} {text[:400]}")
    expect.section("JSON nested past 128 over MCP is refused as too deep")


def run_time(expect, d):
    define(d, "jq-recursion", [step("json.jq", {"filter": RECURSE, "data": 1000000}, timeout="60s")])
    result = run(d, "jq-recursion")
    expect.that(result.get("status") == "failed" and step_error(result).get("code") == "R0130",
                f"deep jq recursion: {json.dumps(result)[:800]}")
    expect.section("jq recursing a million deep fails its step (R0130)")

    define(d, "jq-forever", [step("json.jq", {"filter": "last(range(1e18))"}, timeout="3s")])
    started = time.time()
    results = [None, None]

    def forever(i):
        results[i] = run(d, "jq-forever")

    threads = [threading.Thread(target=forever, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.time() - started
    for result in results:
        expect.that(result and step_error(result).get("code") == "R0101", f"endless jq: {json.dumps(result)[:600]}")
    expect.that(took < 20, f"two endless jq evaluations with a 3 s timeout took {took:.1f} s")
    expect.that(within(lambda: not jq_helpers(), 5), f"jq evaluations still running: {jq_helpers()}")
    define(d, "jq-cancelled", [step("json.jq", {"filter": "last(range(1e18))"}, timeout="120s")])
    started = run(d, "jq-cancelled", wait=False)
    wait_for("the jq evaluation starts", lambda: jq_helpers(), 20)
    call(d, "opcode.signal", {"workflow_id": started["workflow_id"], "signal_type": "cancel", "payload": {"reason": "enough"}})
    status = wait_for("the run is cancelled", lambda: (call(d, "opcode.status", {
        "workflow_id": started["workflow_id"]})["status"] == "cancelled") or None, 20)
    gone = wait_for("the cancelled jq stops", lambda: (not jq_helpers()) or None, 5)
    expect.that(status and gone, f"a cancelled jq evaluation: {jq_helpers()}")
    expect.section("endless jq is killed at its step's timeout and at a cancel")

    define(d, "jq-memory", [step("json.jq", {"filter": "[repeat(.)]", "data": "x" * 1000}, timeout="60s")])
    result = run(d, "jq-memory")
    expect.that(step_error(result).get("code") == "R0130", f"jq repeat: {json.dumps(result)[:600]}")
    define(d, "expr-range", [step("expr.eval", {"expression": "len(1..4000000000)"}, timeout="60s")])
    result = run(d, "expr-range")
    expect.that(step_error(result).get("code") == "R0130", f"Expr range of 4e9: {json.dumps(result)[:600]}")
    define(d, "expr-1e10", [step("expr.eval", {
        "expression": "len(map(1..100000, {len(map(1..100000, {# * 2}))}))"}, timeout="3s")])
    result = run(d, "expr-1e10")
    expect.that(step_error(result).get("code") in ("R0101", "R0130"), f"Expr over 10^10: {json.dumps(result)[:600]}")
    expect.that(within(lambda: not jq_helpers(), 5), f"Expr evaluations still running: {jq_helpers()}")
    define(d, "cel-1e8", [step("expr.eval", {"expression": HUNDRED_MILLION})])
    result = run(d, "cel-1e8")
    expect.that(step_error(result).get("code") == "R0130", f"CEL over 10^8: {json.dumps(result)[:600]}")
    define(d, "while-forever", [{"id": "s", "type": "loop", "config": {
        "mode": "while", "condition": "true", "max_iter": 10000000,
        "body": [dict(step("expr.eval", {"expression": "1"}), id="b")]}}])
    result = run(d, "while-forever")
    expect.that(result.get("status") == "failed" and "R0130" in json.dumps(result),
                f"a while loop of 10^7: {json.dumps(result)[:600]}")
    define(d, "for-each-500k", [{"id": "s", "type": "loop", "config": {
        "over": "inputs.items", "body": [dict(step("expr.eval", {"expression": "iter.item"}), id="b")]}}],
           inputs={"items": {"type": "array"}})
    result = run(d, "for-each-500k", {"items": list(range(500000))})
    expect.that(result.get("status") == "failed" and "R0130" in json.dumps(result),
                f"for_each over 500k: {json.dumps(result)[:600]}")
    rss = int([line for line in open(f"/proc/{d.process.pid}/status") if line.startswith("VmRSS")][0].split()[1])
    expect.that(rss < 600 * 1024, f"the daemon's RSS is {rss // 1024} MB")
    expect.section("memory-hungry evaluations and loops fail their run (R0130); the daemon stays small")


def floods(expect, d):
    statuses = ["completed", "failed"] * 16384
    answer = call(d, "opcode.query", {"resource": "workflows", "filter": {"status": statuses}, "limit": 5})
    expect.that("workflows" in answer, f"a 32,768-item status filter: {json.dumps(answer)[:400]}")
    expect.that(get(d, "/readyz")[0] == 200, "the store is unready after a large filter")
    expect.section("a status filter of 32,768 items reads as the statuses it names")

    big = "x" * (20 << 20)
    result = define(d, "big", [step("workflow.log", {"message": big})])
    expect.that(result.get("version") == "v1", f"a 20 MiB define over /mcp: {json.dumps(result)[:300]}")
    expect.that(sse_post_status(d, {"jsonrpc": "2.0", "id": 1, "method": "ping",
                                    "params": {"_meta": {"pad": big}}}) == 202, "a 20 MiB /message is refused")
    expect.section("a 20 MiB message is read on both transports (a workflow source may be 32 MiB)")


def sse_post_status(d, message):
    """Opens a legacy SSE session and POSTs `message` to its endpoint: the status."""
    import http.client
    stream = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    stream.request("GET", "/sse", headers={"Accept": "text/event-stream"})
    response = stream.getresponse()
    endpoint = None
    while endpoint is None:
        line = response.fp.readline().decode().strip()
        if line.startswith("data:") and "sessionId" in line:
            endpoint = line.split(":", 1)[1].strip()
    post = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    post.request("POST", endpoint, body=json.dumps(message), headers={"Content-Type": "application/json"})
    status = post.getresponse().status
    stream.close()
    return status


def main(binary):
    expect = Expectations()
    with tempfile.TemporaryDirectory() as home:
        settings = {"limits": {"jq_memory": "256MiB", "expr_memory": "256MiB", "loop_iterations": 5000}}
        d = daemon(binary, home, settings)
        watch = LivezWatch(d)
        try:
            compile_time(expect, d)
            run_time(expect, d)
            floods(expect, d)
        finally:
            worst, slow = watch.finish()
            alive = d.process.poll() is None
            d.terminate() if alive else None
        expect.that(alive, "the daemon died: " + open(f"{home}/daemon.log").read()[-3000:])
        expect.that(slow == 0, f"/livez took over {LIVEZ_BOUND_MS} ms {slow} times (worst {worst:.0f} ms)")
        print(f"  /livez: slowest answer {worst:.1f} ms")
        expect.section(f"the daemon lived through all of it in one process, answering /livez within {LIVEZ_BOUND_MS} ms")
        # Nothing it recorded makes it fall over again at the next start.
        d = daemon(binary, home, settings, port=d.port)
        try:
            expect.that(get(d, "/livez")[0] == 200, "the daemon does not start again")
            failed = call(d, "opcode.query", {"resource": "workflows", "filter": {"status": "active"}})
            expect.that(not failed.get("workflows"), f"runs left active: {failed}")
        finally:
            d.terminate()
        expect.section("the daemon starts again, nothing left to replay")
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
