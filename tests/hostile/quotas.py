"""Disk and memory quotas of sandboxed steps (spec/isolation.md, `disk`
and `memory`): a step filling its workspace past its `disk` is stopped
and fails with R0130 naming the bound, and so does the next step of the
same run while the workspace stays full; a step allocating more than the
default memory cap, with no `memory` asked anywhere, fails with R0130
(`memory`) where the host offers the memory controller. The daemon lives.

Usage: python quotas.py PATH_TO_OPCODE
"""

import json
import os
import sys
import tempfile

from common import Expectations, call, daemon


def shell(step_id, script, **extra):
    return {"id": step_id, "action": "shell.exec", **extra,
            "params": {"command": "/bin/sh", "args": ["-c", script], "timeout": "60s"}}


def memory_controller():
    """Does the host offer the memory controller (cgroup v1 or v2)?"""
    if os.path.isfile("/sys/fs/cgroup/memory/tasks"):
        return True
    unified = "/sys/fs/cgroup/cgroup.controllers"
    return os.path.exists(unified) and "memory" in open(unified).read().split()


def main(binary):
    expect = Expectations()
    with tempfile.TemporaryDirectory() as home:
        d = daemon(binary, home)
        try:
            steps = [
                shell("fill", "dd if=/dev/zero of=big bs=1M count=400 2>&1; sleep 5; echo done",
                      isolation={"disk": "64MiB"}, on_error={"strategy": "ignore"}),
                shell("after", "echo still here", isolation={"disk": "64MiB"}, depends_on=["fill"],
                      on_error={"strategy": "ignore"}),
            ]
            defined = call(d, "opcode.define", {"name": "fill", "definition": {"steps": steps}})
            expect.that("version" in defined, f"define: {defined}")
            run = call(d, "opcode.run", {"template_name": "fill", "include": ["steps"]}, timeout=180)
            errors = {k: (v.get("error") or {}) for k, v in (run.get("steps") or {}).items()}
            for step_id in ("fill", "after"):
                error = errors.get(step_id, {})
                expect.that(error.get("code") == "R0130" and "isolation.disk" in error.get("message", ""),
                            f"{step_id}: {json.dumps(run)[:1200]}")
            expect.section("a step filling its workspace past isolation.disk is stopped (R0130), "
                           "and the run's next step too while it stays full")

            if memory_controller():
                hog = [shell("hog", "python3 -c 'b = bytearray(3 << 30); print(len(b))'")]
                call(d, "opcode.define", {"name": "hog", "definition": {"steps": hog}})
                run = call(d, "opcode.run", {"template_name": "hog", "include": ["steps"]}, timeout=180)
                error = ((run.get("steps") or {}).get("hog") or {}).get("error") or {}
                expect.that(run.get("status") == "failed" and error.get("code") == "R0130"
                            and (error.get("details") or {}).get("limit") == "memory", f"hog: {json.dumps(run)[:1200]}")
                expect.section("3 GiB allocated with no memory asked: the default cap stops it (R0130, memory)")
            else:
                print("skip - the host offers no memory controller: the default memory cap is not applied")
            expect.that(d.process.poll() is None, "the daemon died")
        finally:
            d.terminate()
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
