"""Commands die with the daemon, and a crash loop ends in quarantine
(spec/limits.md, "the process is never the casualty").

A `shell.exec` step appends `start` to a ledger, sleeps in a process of
its own (a grandchild, whose command line names the ledger too), then
appends `done`. The daemon is killed (SIGKILL, then SIGTERM) while the command is in
flight: the command must die with it, so that after the restart the
re-dispatched command never overlaps its predecessor and the ledger reads
`start, start, done`. Both with the sandbox and without it (the tethering
helper). Then the daemon is killed at every recovery of a run: past
`limits.recoveries` the run is quarantined, the daemon starts, and resuming
the run by hand completes it.

Usage: python orphans.py PATH_TO_OPCODE   (as root: the sandbox's stages)
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

from common import Expectations, call, daemon, get, wait_for, within

SLEEP = 6


def ledger_step(ledger, isolation):
    script = f"echo start >> {ledger}; sh -c 'sleep {SLEEP}; : {ledger}'; echo done >> {ledger}"
    return {"steps": [{"id": "s", "action": "shell.exec", "isolation": isolation,
                       "params": {"command": "sh", "args": ["-c", script]}, "timeout": "60s"}]}


def lines(ledger):
    try:
        return open(ledger).read().split()
    except FileNotFoundError:
        return []


def alive(ledger):
    """Pids of processes whose command line names the ledger."""
    found = subprocess.run(["pgrep", "-f", ledger], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found if int(p) != os.getpid()]


def dies(ledger):
    """Whether every process naming the ledger is gone within 5 s."""
    return within(lambda: not alive(ledger), 5) is not None


def status(d, run_id):
    return call(d, "opcode.status", {"workflow_id": run_id}).get("status")


def shared_folder(home):
    """A folder the sandbox user may write to, under the test's HOME."""
    os.chmod(home, 0o711)
    folder = f"{home}/shared"
    os.makedirs(folder)
    os.chmod(folder, 0o777)
    return folder


def settings_for(folder, **limits):
    return {"limits": limits, "isolation": {"grants": [
        {"template": "sandboxed", "workspaces": [folder]},
        {"template": "bare", "enabled": False}]}}


def start_run(d, template, folder, ledger):
    isolation = {"workspace": folder} if template == "sandboxed" else {"enabled": False}
    defined = call(d, "opcode.define", {"name": template, "definition": ledger_step(ledger, isolation)})
    assert "error" not in defined, defined
    started = call(d, "opcode.run", {"template_name": template, "wait": False})
    assert "workflow_id" in started, started
    return started["workflow_id"]


def killed_in_flight(expect, binary, template, how):
    with tempfile.TemporaryDirectory() as home:
        folder = shared_folder(home)
        ledger = f"{folder}/ledger-{template}-{how}"
        settings = settings_for(folder)
        d = daemon(binary, home, settings)
        try:
            run_id = start_run(d, template, folder, ledger)
            wait_for("the command starts", lambda: lines(ledger) == ["start"], 30)
        finally:
            d.process.send_signal(how)
            d.process.wait(timeout=15)
        expect.that(dies(ledger), f"{template}, {how.name}: the command outlived the daemon: {alive(ledger)}")
        d = daemon(binary, home, settings, port=d.port)
        try:
            within(lambda: status(d, run_id) in ("completed", "failed"), SLEEP * 4)
            expect.that(status(d, run_id) == "completed", f"{template}, {how.name}: {status(d, run_id)}")
            expect.that(lines(ledger) == ["start", "start", "done"], f"{template}, {how.name}: {lines(ledger)}")
        finally:
            d.terminate()


def crash_loop(expect, binary):
    with tempfile.TemporaryDirectory() as home:
        folder = shared_folder(home)
        ledger = f"{folder}/ledger-loop"
        settings = settings_for(folder, recoveries=2)
        d = daemon(binary, home, settings)
        try:
            run_id = start_run(d, "sandboxed", folder, ledger)
            # The original dispatch, then one per recovery allowed: each killed.
            for starts in range(1, 4):
                wait_for(f"start {starts}", lambda: len(lines(ledger)) == starts, 30)
                d.kill()
                expect.that(dies(ledger), f"crash {starts}: the command outlived the daemon")
                d = daemon(binary, home, settings, port=d.port)
            within(lambda: status(d, run_id) == "quarantined", 10)
            expect.that(status(d, run_id) == "quarantined", f"after 3 crashes: {status(d, run_id)}")
            time.sleep(1)
            expect.that(lines(ledger) == ["start"] * 3, f"quarantined, yet dispatched again: {lines(ledger)}")
            expect.that(get(d, "/livez")[0] == 200, "the daemon does not answer")
            events = call(d, "opcode.query", {"resource": "events", "filter": {"workflow_id": run_id}})
            kinds = [e.get("event_type") for e in events.get("events", [])]
            expect.that(kinds.count("workflow_recovered") == 2 and "workflow_quarantined" in kinds,
                        f"the log does not tell the story: {kinds}")
        finally:
            d.terminate()
        resumed = subprocess.run([binary, "resume", run_id, "--db", f"{home}/opcode.db"], capture_output=True,
                                 text=True, env=dict(os.environ, HOME=home), timeout=SLEEP * 5)
        expect.that(resumed.returncode == 0, f"resume by hand: {resumed.returncode} {resumed.stderr[-2000:]}")
        expect.that(lines(ledger) == ["start"] * 4 + ["done"], f"after resume: {lines(ledger)}")


def main(binary):
    binary = os.path.abspath(binary)
    if os.geteuid() != 0:
        print("skip - orphans.py needs root (the sandbox's stages)")
        return
    expect = Expectations()
    for template in ("sandboxed", "bare"):
        for how in (signal.SIGKILL, signal.SIGTERM):
            killed_in_flight(expect, binary, template, how)
    expect.section("commands die with the daemon (kill -9 and SIGTERM, sandboxed or not); "
                   "the ledger reads start, start, done")
    crash_loop(expect, binary)
    expect.section("killed at every recovery, a run is quarantined; the daemon starts; "
                   "resumed by hand it completes")
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
