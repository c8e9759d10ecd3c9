"""The cgroup v2 code path, on whatever v2 hierarchy this host has: the
unified /sys/fs/cgroup of a current distribution, or the v2 hierarchy of a
hybrid host (mounted at /sys/fs/cgroup/unified, or here on a temporary
directory), given to the daemon as `isolation.cgroup_root`. Where the
hierarchy offers the pids and memory controllers, a fork bomb and a memory
hog are stopped by the limits and reported; where it does not, the step
fails closed with R0125 naming the missing limit. Either way no cgroup is
left behind. (tests/mcp/actions.py covers the default hierarchy, v1 on a
hybrid host.)

Usage: python cgroups.py PATH_TO_OPCODE
"""

import json
import os
import subprocess
import sys
import tempfile

from common import call, check, operator_daemon


def v2_root(scratch):
    """A cgroup v2 hierarchy: its path, and whether this test mounted it."""
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split() for line in f]
    for fields in mounts:
        point, kind = fields[4], fields[fields.index("-") + 1]
        if kind == "cgroup2" and point.startswith("/sys/fs/cgroup"):
            return point, False
    os.makedirs(scratch, exist_ok=True)
    subprocess.run(["mount", "-t", "cgroup2", "none", scratch], check=True)
    return scratch, True


def main(binary):
    with tempfile.TemporaryDirectory() as home:
        root, mounted = v2_root(os.path.join(home, "cgroup2"))
        try:
            with open(os.path.join(root, "cgroup.controllers")) as f:
                controllers = f.read().split()
            settings = {"isolation": {"cgroup_root": root}}
            daemon = operator_daemon(binary, home, settings=settings)
            try:
                steps = [
                    {"id": "bomb", "action": "shell.exec", "isolation": {"pids": 48}, "on_error": {"strategy": "ignore"},
                     "params": {"command": "/bin/sh", "args": ["-c", "b() { b | b & }; b; sleep 2; echo after"],
                                "timeout": "8s"}},
                    {"id": "hog", "action": "shell.exec", "depends_on": ["bomb"], "isolation": {"memory": "64MiB"},
                     "on_error": {"strategy": "ignore"},
                     "params": {"command": "python3", "args": ["-c", "b = bytearray(1 << 30); print(len(b))"]}},
                ]
                call(daemon, "opcode.define", {"name": "limits", "definition": {"steps": steps}})
                run = call(daemon, "opcode.run", {"template_name": "limits", "include": ["outputs"]})
                check(run["status"] == "completed", f"limits: {json.dumps(run)[:2000]}")
                results = {k: (v.get("output"), v.get("error")) for k, v in run["steps"].items()}
            finally:
                daemon.terminate()
            for step, controller in [("bomb", "pids"), ("hog", "memory")]:
                output, error = results[step]
                if controller in controllers:
                    # A memory hit fails the step (R0130) with the output in its details.
                    output = output or ((error or {}).get("details") or {}).get("output")
                    hit = output and output["limits_hit"][controller]
                    check(hit and output["isolated"], f"{step} under cgroup v2 {root}: {output}")
                    print(f"ok - cgroup v2 ({root}): the {controller} limit stops the {step} and is reported")
                else:
                    message = (error or {}).get("message", "")
                    check(error and error["code"] == "R0125" and f"{controller}." in message,
                          f"{step} without the {controller} controller: {output} {error}")
                    print(f"ok - cgroup v2 ({root}) lacks the {controller} controller: the {step} fails closed (R0125)")
            parent = os.path.join(root, "opcode")
            left = [d for d in os.listdir(parent) if os.path.isdir(os.path.join(parent, d))] if os.path.isdir(
                parent) else []
            check(not left, f"cgroups left behind in {root}/opcode: {left}")
            print(f"ok - no cgroup left behind in {root} (controllers offered: {' '.join(controllers) or 'none'})")
        finally:
            if mounted:
                subprocess.run(["umount", root], check=False)


if __name__ == "__main__":
    main(sys.argv[1])
