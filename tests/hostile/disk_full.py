"""The disk fills during a later round of a run (spec/limits.md, "a full
disk"): the caller gets a coded storage error (R0131) promptly, not
keep-alives; `/readyz` fails while writes fail; the run is not lost: once
space returns the daemon loads it again by itself and it completes. The
database lives on a small tmpfs of its own, filled by the test.

Usage: python disk_full.py PATH_TO_OPCODE   (as root: it mounts a tmpfs)
"""

import os
import subprocess
import sys
import tempfile
import threading
import time

from common import Expectations, call, daemon, get, wait_for

WORKFLOW = {"steps": [
    {"id": "a", "action": "shell.exec", "params": {"command": "sleep", "args": ["3"]}},
    {"id": "b", "action": "shell.exec", "depends_on": ["a"], "params": {"command": "seq", "args": ["1", "300000"]}},
    {"id": "c", "action": "workflow.log", "depends_on": ["b"], "params": {"message": "the end"}}]}


def fill(folder):
    """Writes a file into `folder` until the disk refuses more."""
    with open(f"{folder}/filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass


def full_disk(expect, binary, home, disk):
    d = daemon(binary, home, {}, db=f"{disk}/opcode.db")
    try:
        call(d, "opcode.define", {"name": "later-round", "definition": WORKFLOW})
        answered = {}

        def run():
            answered["result"] = call(d, "opcode.run", {"template_name": "later-round"}, timeout=120)
            answered["at"] = time.time()

        caller = threading.Thread(target=run)
        caller.start()
        time.sleep(1)
        fill(disk)
        filled = time.time()
        caller.join(60)
        result = answered.get("result") or {}
        error = result.get("error") or {}
        took = answered.get("at", float("inf")) - filled
        expect.that(error.get("code") == "R0131" and "full" in error.get("message", ""),
                    f"the caller got {result}")
        expect.that(took < 15, f"the answer came {took:.1f} s after the disk filled")
        run_id = (error.get("details") or {}).get("workflow_id")
        expect.that(run_id, f"the error does not name the run: {error}")
        status, body = get(d, "/readyz")
        expect.that(status == 503 and "refuses writes" in body, f"/readyz while full: {status} {body}")
        expect.that(get(d, "/livez")[0] == 200, "/livez fails while the disk is full")
        # A small write may still fit (SQLite reuses its journal's space):
        # a run started now either is refused as R0131 or must complete too.
        another = call(d, "opcode.run", {"template_name": "later-round", "wait": False}, timeout=30)
        expect.that("workflow_id" in another or (another.get("error") or {}).get("code") == "R0131",
                    f"a new run while full: {another}")
        runs = [r for r in (run_id, another.get("workflow_id")) if r]
        expect.section("a full disk: R0131 to the caller at once, /readyz fails, /livez answers")

        os.remove(f"{disk}/filler")
        ready = wait_for("/readyz again", lambda: get(d, "/readyz")[0] == 200, 15)
        expect.that(ready, "/readyz still fails after space returned")
        for each in runs:
            wait_for("the run ends", lambda: call(d, "opcode.status", {"workflow_id": each}).get("status")
                     in ("completed", "failed", "cancelled"), 30)
            final = call(d, "opcode.status", {"workflow_id": each, "steps": ["c"]})
            expect.that(final.get("status") == "completed" and final["steps"]["c"]["status"] == "completed",
                        f"after space returned: {str(final)[:1500]}")
        expect.that(d.process.poll() is None, "the daemon died")
        expect.section("space returns: /readyz is ready, the runs are loaded again by themselves and complete")
    finally:
        d.terminate()


def main(binary):
    binary = os.path.abspath(binary)
    if os.geteuid() != 0:
        print("skip - disk_full.py needs root (it mounts a tmpfs)")
        return
    expect = Expectations()
    with tempfile.TemporaryDirectory() as home:
        disk = f"{home}/disk"
        os.makedirs(disk)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", disk], check=True)
        try:
            full_disk(expect, binary, home, disk)
        finally:
            subprocess.run(["umount", "-l", disk], check=False)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
