"""Escapes from the default sandbox, tried as an attacker would: a
`shell.exec` step of a daemon started from its operator's HOME runs
probe.py, which tries each escape and reports what it could do; this file
checks the report and the host. Also: a step's own `isolation` block can
only narrow the settings; `fs.*` does not follow a link out of its tree;
the daemon's token and passphrase are not in its environment.

Usage: python escapes.py PATH_TO_OPCODE
"""

import json
import os
import secrets
import sqlite3
import sys
import tempfile

from common import TOKEN, VAULT_KEY, Expectations, call, check, operator_daemon, whole

PROBE = open(os.path.join(os.path.dirname(__file__), "probe.py")).read()
ZERO_CAPS = "0000000000000000"


def probe_step(nonce, daemon, home):
    return {"id": "probe", "action": "shell.exec", "params": {
        "command": "python3", "args": ["-c", PROBE, nonce, str(daemon.process.pid), str(daemon.port), home,
                                       f"{home}/opcode.db"], "timeout": "60s"}}


def sandbox_holds(binary, settings=None):
    nonce = secrets.token_hex(6)
    with tempfile.TemporaryDirectory() as home:
        daemon = operator_daemon(binary, home, settings=settings)
        try:
            call(daemon, "opcode.define", {"name": "probe", "definition": {"steps": [probe_step(nonce, daemon, home)]}})
            run = call(daemon, "opcode.run", {"template_name": "probe", "include": ["outputs"]})
            check(run["status"] == "completed", f"the probe did not run: {json.dumps(run)[:3000]}")
            output = whole(daemon, run["steps"]["probe"]["output"])
            check(output["isolated"], f"the probe was not isolated: {output}")
            check(isinstance(output["stdout"], dict), f"no report: {output['stderr'][-3000:]}")
            report = output["stdout"]
            expect = Expectations()
            status = report["status"]
            for key in ["CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"]:
                expect.that(status[key] == ZERO_CAPS, f"{key} is {status[key]}: {status}")
            expect.that(status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", f"no_new_privs or seccomp: {status}")
            expect.that(status["Uid"].split()[0] != "0" or report["id"]["out"].startswith("uid=0"), f"uid: {status}")
            expect.section("a sandboxed step has no capabilities, no_new_privs and a seccomp filter")

            expect.that(report["remount"]["exit"] != 0 and not os.path.exists(f"/var/tmp/opcode-escape-{nonce}"),
                  f"remount: {report['remount']}")
            expect.that(report["remount_proc_sys"]["exit"] != 0, f"remount /proc/sys: {report['remount_proc_sys']}")
            expect.that(report["proc_sys_write"] != "ok", "/proc/sys is writable")
            expect.section("the host file system and /proc/sys stay read-only (remount refused)")

            expect.that(report["umount_proc"]["exit"] != 0, f"umount /proc: {report['umount_proc']}")
            leaked = [pid for pid, env in report["environs"].items() if TOKEN in env or VAULT_KEY in env]
            expect.that(not leaked, f"the daemon's environment was readable from pids {leaked}")
            expect.that(not report["daemon_visible"] and max(report["visible_pids"]) < 100,
                  f"host pids are visible: {report['visible_pids'][:20]}")
            expect.section("/proc cannot be unmounted; no host process is visible")

            expect.that(report["connect"] != "connected", "the daemon is reachable from the sandbox")
            for key in ["nsenter", "nsenter_init"]:
                expect.that("entered" not in report[key]["out"], f"{key}: {report[key]}")
            expect.section("the daemon is unreachable: no network, no setns")

            calls = report["syscalls"]
            allowed = {name: result for name, result in calls.items() if result != "EPERM"}
            expect.that(not allowed, f"syscalls not refused with EPERM: {allowed}")
            expect.that("unshared" not in report["unshare_cmd"]["out"], f"unshare: {report['unshare_cmd']}")
            expect.that("made" not in report["mknod"]["out"], f"mknod: {report['mknod']}")
            expect.that("read" not in report["raw_disk"]["out"], f"raw disks: {report['raw_disk']}")
            expect.that(set(report["devices"]) <= {"null", "zero", "full", "random", "urandom", "tty", "shm", "fd",
                                             "stdin", "stdout", "stderr", "pts", "ptmx"},
                  f"host devices visible: {report['devices']}")
            expect.section("mount, setns, unshare, ptrace, kexec, modules, bpf, keyctl… are refused; no host devices")

            expect.that(os.path.realpath(report["cwd"]) != os.path.realpath(home), f"the step ran in the daemon's HOME")
            for path, text in report["files"].items():
                expect.that(not text or text.startswith("error: "), f"the step read {path}: {text[:200]}")
            for key in ["TOKEN", "VAULT_KEY"]:
                value = {"TOKEN": TOKEN, "VAULT_KEY": VAULT_KEY}[key]
                expect.that(value not in json.dumps(report), f"the {key} reached the step")
            expect.that("wrote" not in report["db_write"]["out"], f"db write: {report['db_write']}")
            with sqlite3.connect(f"{home}/opcode.db") as db:
                tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'pwned%'")]
            expect.that(not tables, f"the step wrote into the live database: {tables}")
            expect.section("a fresh workspace per run; the daemon's files are invisible to a step")

            environ = open(f"/proc/{daemon.process.pid}/environ", "rb").read().decode("utf-8", "replace")
            cmdline = open(f"/proc/{daemon.process.pid}/cmdline", "rb").read().decode("utf-8", "replace")
            expect.that(TOKEN not in environ and VAULT_KEY not in environ, "the daemon keeps its secrets in its environment")
            expect.that(TOKEN not in cmdline, "the daemon keeps its token in its command line")
            expect.section("the daemon's token and passphrase are not in its environment once read")
            expect.done()
        finally:
            daemon.terminate()


def widening_is_refused(binary):
    with tempfile.TemporaryDirectory() as home:
        settings = {"isolation": {"grants": [{"template": "trusted", "network": True}]}}
        daemon = operator_daemon(binary, home, settings=settings)
        try:
            for block in [{"enabled": False}, {"workspace": "/"}, {"network": True}, {"writable": True, "workspace": "/etc"}]:
                answer = call(daemon, "opcode.define", {"name": "wide", "definition": {"steps": [
                    {"id": "s", "action": "shell.exec", "isolation": block, "params": {"command": "true"}}]}})
                codes = [d["code"] for d in answer.get("diagnostics", answer.get("error", {}).get("diagnostics", []))]
                check("version" not in answer and "E0052" in json.dumps(answer), f"{block} was accepted: {answer}")
                check(codes == [] or "E0052" in codes, f"{block}: {answer}")
            narrow = call(daemon, "opcode.define", {"name": "narrow", "definition": {"steps": [
                {"id": "s", "action": "shell.exec", "isolation": {"memory": "64MiB", "writable": False},
                 "params": {"command": "true"}}]}})
            check("version" in narrow, f"a narrowing block was refused: {narrow}")
            granted = call(daemon, "opcode.define", {"name": "trusted", "definition": {"steps": [
                {"id": "s", "action": "shell.exec", "isolation": {"network": True},
                 "params": {"command": "/bin/sh", "args": ["-c", "ip -o link | wc -l"]}}]}})
            check("version" in granted, f"a granted widening was refused: {granted}")
            run = call(daemon, "opcode.run", {"template_name": "trusted", "include": ["outputs"]})
            check(run["status"] == "completed", f"trusted: {run}")
            print("ok - a step's isolation may only narrow the settings; a grant names the template it widens for")
        finally:
            daemon.terminate()


def links_do_not_leave_the_tree(binary):
    nonce = secrets.token_hex(6)
    target = f"/var/tmp/opcode-link-{nonce}"
    with tempfile.TemporaryDirectory() as home:
        daemon = operator_daemon(binary, home)
        try:
            steps = [
                {"id": "link", "action": "shell.exec", "params": {
                    "command": "/bin/sh", "args": ["-c", f"ln -s {target} dangling && ln -s /etc escape && pwd"]}},
                {"id": "write", "action": "fs.write", "depends_on": ["link"], "on_error": {"strategy": "ignore"},
                 "params": {"path": "dangling", "content": "escaped"}},
                {"id": "through", "action": "fs.write", "depends_on": ["write"], "on_error": {"strategy": "ignore"},
                 "params": {"path": "escape/opcode-escape", "content": "escaped"}},
                {"id": "read", "action": "fs.read", "depends_on": ["through"], "on_error": {"strategy": "ignore"},
                 "params": {"path": "escape/hostname"}},
                {"id": "inside", "action": "fs.write", "depends_on": ["read"], "params": {"path": "ok.txt",
                                                                                        "content": "fine"}},
            ]
            call(daemon, "opcode.define", {"name": "links", "definition": {"steps": steps}})
            run = call(daemon, "opcode.run", {"template_name": "links", "include": ["outputs"]})
            check(run["status"] == "completed", f"links: {json.dumps(run)[:3000]}")
            errors = {k: (v.get("error") or {}).get("code") for k, v in run["steps"].items()}
            check(not os.path.exists(target) and not os.path.exists("/etc/opcode-escape"), "a link was followed out")
            check(errors["write"] == "R0126" and errors["through"] == "R0126" and errors["read"] == "R0126",
                  f"fs through links: {errors}")
            check(run["steps"]["inside"]["output"]["size"] == 4, f"inside: {run['steps']['inside']}")
            print("ok - fs.* refuses links that leave the workspace, dangling ones included")
        finally:
            daemon.terminate()


def main(binary):
    print("- the default sandbox, in a user namespace")
    sandbox_holds(binary)
    print("- the sandbox of a host without user namespaces (isolation.user_namespace: false)")
    sandbox_holds(binary, {"isolation": {"user_namespace": False}})
    widening_is_refused(binary)
    links_do_not_leave_the_tree(binary)


if __name__ == "__main__":
    main(sys.argv[1])
