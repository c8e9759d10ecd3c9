"""Several daemons on one PostgreSQL, one fault at a time (spec/scale-out.md).

Three `opcode serve` share a throw-away cluster (tests/postgres/cluster),
with short leases. A mixed load runs: chains of `shell.exec` steps, each
appending `RUN STEP` to a ledger file, and runs that wait for a signal.
Then, one at a time: kill -9 of a daemon; SIGSTOP of a daemon for longer
than its lease, then SIGCONT; a PostgreSQL restart; a signal sent to a
daemon that does not own the run. After each, read from the database
itself:

- every run completed;
- every step completed once in its log, and sequence numbers have no gaps;
- every step's effect is in the ledger, more than once only for a step
  that was in flight at the fault (its log notes the re-dispatch);
- the runs of a killed daemon were taken over within lease + poll (+1 s);
- the frozen daemon's late commits were refused (its log says so) and
  left nothing behind (the checks above);
- a signal sent to another daemon reaches the owner at once, and the
  panel's live stream of a third daemon follows the commits.

Usage: python faults.py PATH_TO_OPCODE
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))

from common import Expectations, call, daemon, wait_for, within  # noqa: E402

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "postgres", "cluster")
LEASE = 3.0
POLL = 0.2
STEPS = 6


def psql(url, sql):
    """Rows of `sql` as lists of text."""
    out = subprocess.run(["psql", url, "-AtF", "\t", "-c", sql], check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def tail_of(path, lines=20):
    """The last lines of a log file, headed by its path ("" when it is missing)."""
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as log:
        return f"--- {path}\n" + "".join(log.readlines()[-lines:])


class Scale:
    def __init__(self, binary, root):
        self.binary, self.root = binary, root
        self.cluster = f"{root}/pg"
        started = subprocess.run([CLUSTER, "start", self.cluster], capture_output=True, text=True)
        if started.returncode != 0:
            sys.exit(f"the PostgreSQL cluster did not start: {started.stderr.strip()}\n"
                     + tail_of(f"{self.cluster}/initdb.log") + tail_of(f"{self.cluster}/server.log"))
        admin = started.stdout.strip()
        psql(admin, "CREATE DATABASE opcode")
        self.url = admin.rsplit("/", 1)[0] + "/opcode"
        self.ledger = f"{root}/ledger"
        self.daemons = []
        self.tags = {}

    def start(self, name):
        home = f"{self.root}/{name}"
        os.makedirs(home, exist_ok=True)
        running = daemon(self.binary, home, {"isolation": {"enabled": False}, "lease_ttl": f"{LEASE}s"},
                         db=self.url)
        running.name = name
        self.daemons.append(running)
        return running

    def stop(self):
        for d in self.daemons:
            if d.process.poll() is None:
                d.process.send_signal(signal.SIGCONT)
                d.process.kill()
                d.process.wait()
        subprocess.run([CLUSTER, "stop", self.cluster], check=False)

    def owner_of(self, d):
        """The lease owner name of daemon `d` (`host:pid:start`)."""
        return f":{d.process.pid}:"

    def chain(self):
        steps = []
        for i in range(1, STEPS + 1):
            script = f'echo "$1 s{i}" >> {self.ledger}; sleep 0.3'
            step = {"id": f"s{i}", "action": "shell.exec",
                    "params": {"command": "sh", "args": ["-c", script, "sh", "${{inputs.tag}}"]}}
            if i > 1:
                step["depends_on"] = [f"s{i - 1}"]
            steps.append(step)
        return {"inputs": {"tag": {"type": "string"}}, "steps": steps}

    def waiting(self):
        """A run that waits for a signal while a slow step keeps it loaded
        (and its lease held) on the daemon that runs it."""
        return {"steps": [
            {"id": "slow", "action": "shell.exec", "params": {"command": "sleep", "args": ["3"]}},
            {"id": "gate", "type": "wait", "config": {"signal": "go"}},
            {"id": "after", "action": "shell.exec", "depends_on": ["gate", "slow"],
             "params": {"command": "echo", "args": ["${{steps.gate.output.payload.word}}"]}},
        ], "output": {"word": "${{steps.after.output.stdout}}"}}

    def load(self, count, phase):
        """Starts `count` chains spread over the live daemons: their ids."""
        live = [d for d in self.daemons if d.process.poll() is None]
        ids = []
        for n in range(count):
            tag = f"{phase}-{n}"
            started = call(live[n % len(live)], "opcode.run",
                           {"template_name": "chain", "params": {"tag": tag}, "wait": False, "agent_id": f"agent-{n % 2}"})
            ids.append(started["workflow_id"])
            self.tags[started["workflow_id"]] = tag
        return ids

    def finished(self, ids, seconds):
        placeholders = ",".join(f"'{i}'" for i in ids)

        def done():
            rows = psql(self.url, f"SELECT status FROM workflows WHERE id IN ({placeholders})")
            return len(rows) == len(ids) and all(r[0] == "completed" for r in rows)
        return within(done, seconds) is not None

    def audit(self, ex, ids, phase):
        """The checks every fault is followed by."""
        placeholders = ",".join(f"'{i}'" for i in ids)
        statuses = psql(self.url, f"SELECT id, status FROM workflows WHERE id IN ({placeholders})")
        ex.that(all(s == "completed" for _, s in statuses) and len(statuses) == len(ids),
                 f"{phase}: every run completed: {statuses}")
        twice = psql(self.url, f"SELECT workflow_id, step_id, count(*) FROM log_entries WHERE workflow_id IN "
                     f"({placeholders}) AND event_type = 'step_completed' GROUP BY 1, 2 HAVING count(*) <> 1")
        ex.that(not twice, f"{phase}: every completed step is recorded once: {twice}")
        completed = psql(self.url, f"SELECT count(*) FROM log_entries WHERE workflow_id IN ({placeholders}) "
                         f"AND event_type = 'step_completed'")
        ex.that(int(completed[0][0]) == len(ids) * STEPS, f"{phase}: {completed[0][0]} steps completed")
        gaps = psql(self.url, f"SELECT w.id, w.last_seq, count(e.seq), min(e.seq), max(e.seq) FROM workflows w "
                    f"JOIN log_entries e ON e.workflow_id = w.id WHERE w.id IN ({placeholders}) GROUP BY w.id, w.last_seq "
                    f"HAVING count(e.seq) <> w.last_seq OR min(e.seq) <> 1 OR max(e.seq) <> w.last_seq")
        ex.that(not gaps, f"{phase}: sequence numbers have no gaps: {gaps}")
        ledger = open(self.ledger).read().split("\n")
        redispatched = {(w, s) for w, s in psql(
            self.url, f"SELECT workflow_id, step_id FROM log_entries WHERE workflow_id IN ({placeholders}) "
            f"AND event_type = 'action_redispatched'")}
        for run in ids:
            tag = self.tags[run]
            for i in range(1, STEPS + 1):
                times = ledger.count(f"{tag} s{i}")
                ex.that(times >= 1, f"{phase}: {tag} s{i} ran")
                if times > 1:
                    ex.that((run, f"s{i}") in redispatched,
                             f"{phase}: {tag} s{i} ran {times} times but was not in flight at the fault")
        return len(redispatched)

    def taken_over_by(self, ids, since):
        """Seconds from `since` to the last `workflow_recovered` note of `ids`."""
        placeholders = ",".join(f"'{i}'" for i in ids)
        rows = psql(self.url, f"SELECT max(at) FROM log_entries WHERE workflow_id IN ({placeholders}) "
                    f"AND event_type = 'workflow_recovered'")
        if not rows or not rows[0][0]:
            return None
        return self.seconds(rows[0][0]) - since

    @staticmethod
    def seconds(at):
        """An RFC 3339 UTC time (`2026-01-01T00:00:00.000Z`) as epoch seconds."""
        import calendar
        return calendar.timegm(time.strptime(at[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + at[19:23])

    def held_by(self, d, ids):
        placeholders = ",".join(f"'{i}'" for i in ids)
        rows = psql(self.url, f"SELECT id FROM workflows WHERE id IN ({placeholders}) AND lease_owner LIKE "
                    f"'%{self.owner_of(d)}%'")
        return [r[0] for r in rows]


def kill_one(ex, scale, a, others):
    ids = scale.load(9, "kill")
    time.sleep(1.0)
    owned = scale.held_by(a, ids)
    ex.that(owned, f"kill: the victim owns runs ({len(owned)})")
    scraped = urllib.request.urlopen(f"{others[0].url}/metrics", timeout=10).read().decode()
    holders = [line for line in scraped.splitlines() if line.startswith("opcode_leases_held{")]
    ex.that(len(holders) >= 2, f"kill: /metrics of any daemon shows the leases of each: {holders}")
    killed_at = time.time()
    a.process.kill()
    a.process.wait()
    ex.that(scale.finished(ids, 60), "kill: the load finishes on the others")
    took = scale.taken_over_by(owned, killed_at)
    ex.that(took is not None and took <= LEASE + POLL + 1.0,
             f"kill: its runs were taken over {took if took is None else round(took, 2)} s after the kill "
             f"(lease {LEASE} s)")
    again = scale.audit(ex, ids, "kill")
    print(f"  kill: {len(owned)} runs taken over {took:.2f} s after the kill; {again} steps ran again")
    ex.section("kill -9 of a daemon: its runs finish on the others")


def freeze_one(ex, scale, b):
    ids = scale.load(9, "freeze")
    # A caller waiting on the daemon about to freeze: its run finishes
    # elsewhere, and the answer must still come, completed.
    waited = {}

    def wait_on_b():
        waited["result"] = call(b, "opcode.run", {"template_name": "chain", "params": {"tag": "freeze-wait"}},
                                timeout=120)
    waiter = threading.Thread(target=wait_on_b, daemon=True)
    waiter.start()
    time.sleep(1.0)
    owned = scale.held_by(b, ids)
    ex.that(owned, f"freeze: the frozen daemon owns runs ({len(owned)})")
    b.process.send_signal(signal.SIGSTOP)
    time.sleep(LEASE + 2.5)
    taken = [r for r in owned if r not in scale.held_by(b, owned)]
    ex.that(taken, f"freeze: its runs moved on while it slept ({len(taken)} of {len(owned)})")
    b.process.send_signal(signal.SIGCONT)
    ex.that(scale.finished(ids, 60), "freeze: the load finishes")
    time.sleep(1.0)
    log = open(f"{b.home}/daemon.log").read()
    refused = log.count("owned by another writer now")
    ex.that(refused > 0, f"freeze: the woken daemon's late commits were refused ({refused} in its log)")
    waiter.join(60)
    answer = waited.get("result", {})
    ex.that(answer.get("status") == "completed",
            f"freeze: opcode.run waiting on the frozen daemon answered once another finished it: "
            f"{str(answer)[:300]}")
    if answer.get("workflow_id"):
        ids.append(answer["workflow_id"])
        scale.tags[answer["workflow_id"]] = "freeze-wait"
    again = scale.audit(ex, ids, "freeze")
    print(f"  freeze: {len(taken)} runs taken over, {refused} late commits refused; {again} steps ran again")
    ex.section("SIGSTOP past the lease, then SIGCONT: its late commits are refused")


def restart_database(ex, scale):
    ids = scale.load(6, "restart")
    time.sleep(0.8)
    subprocess.run([CLUSTER, "restart", scale.cluster], check=True)
    ex.that(scale.finished(ids, 90), "restart: the load finishes after PostgreSQL restarts")
    again = scale.audit(ex, ids, "restart")
    print(f"  restart: {len(ids)} runs finished; {again} steps ran again")
    ex.section("PostgreSQL restarts mid-load: the daemons carry on")


def signal_elsewhere(ex, scale, owner_daemon, sender, watcher):
    changes = []

    def follow():
        try:
            with urllib.request.urlopen(f"{watcher.url}/panel/live", timeout=20) as stream:
                for line in stream:
                    if line.startswith(b"data:"):
                        changes.append(json.loads(line[5:]))
        except OSError:
            pass
    threading.Thread(target=follow, daemon=True).start()
    time.sleep(0.3)
    run = call(owner_daemon, "opcode.run", {"template_name": "waiting", "wait": False})["workflow_id"]
    time.sleep(0.5)
    held = psql(scale.url, f"SELECT lease_owner FROM workflows WHERE id = '{run}'")[0][0]
    ex.that(scale.owner_of(owner_daemon) in held, f"signal: the run is held by the daemon that started it: {held}")
    sent_at = time.time()
    answer = call(sender, "opcode.signal", {"workflow_id": run, "signal_type": "signal",
                                            "payload": {"name": "go", "data": {"word": "carried"}}})
    ex.that(answer.get("queued") is True and scale.owner_of(owner_daemon) in answer.get("owner", ""),
            f"signal: the other daemon queued it for the owner: {answer}")
    opened = within(lambda: psql(scale.url, f"SELECT at FROM log_entries WHERE workflow_id = '{run}' "
                                 f"AND step_id = 'gate' AND event_type = 'step_completed'"), 10)
    took = scale.seconds(opened[0][0]) - sent_at if opened else None
    print(f"  signal: the owner opened the gate {took if took is None else round(took, 2)} s after another "
          f"daemon took the signal")
    ex.that(took is not None and took < 1.0, f"signal: the owner had it at once ({took} s)")
    done = within(lambda: psql(scale.url, f"SELECT status FROM workflows WHERE id = '{run}'")[0][0]
                  == "completed", 10)
    ex.that(done is not None, "signal: the run completed")
    output = json.loads(psql(scale.url, f"SELECT output FROM workflows WHERE id = '{run}'")[0][0] or "{}")
    ex.that(output.get("word", "").strip() == "carried", f"signal: its payload arrived: {output}")
    seen = within(lambda: any(
        c.get("workflow_id") == run for c in changes), 5)
    ex.that(seen is not None, f"signal: a third daemon's panel saw the run's commits ({len(changes)} changes)")
    ex.section("a signal sent to a daemon that does not own the run")


def cron_once(ex, scale, d):
    """A schedule every 2 s, seen by every daemon, fires each tick once."""
    ticks = f"{scale.root}/ticks"
    step = {"id": "tick", "action": "shell.exec",
            "params": {"command": "sh", "args": ["-c", f'echo "$1" >> {ticks}', "sh", "${{workflow.run_id}}"]}}
    defined = call(d, "opcode.define", {"name": "ticker", "definition": {"steps": [step]},
                                        "triggers": {"cron": "*/2 * * * * *", "missed": "skip"}})
    ex.that(defined.get("schedule"), f"cron: the template's trigger is scheduled: {defined}")
    time.sleep(9)
    call(d, "opcode.define", {"name": "ticker", "definition": {"steps": [step]}})
    time.sleep(1.5)
    runs = psql(scale.url, "SELECT id FROM workflows WHERE template_name = 'ticker'")
    fired = open(ticks).read().split() if os.path.exists(ticks) else []
    live = sum(1 for daemon in scale.daemons if daemon.process.poll() is None)
    print(f"  cron: {len(runs)} ticks fired by {live} daemons; {len(fired)} effects")
    ex.that(len(runs) >= 3, f"cron: the schedule fired ({len(runs)} runs)")
    ex.that(sorted(fired) == sorted(r[0] for r in runs) and len(set(fired)) == len(fired),
            f"cron: each tick ran once: {len(fired)} effects for {len(runs)} runs")
    ex.section("a cron schedule on several daemons fires each tick once")


def one_at_a_time(ex, scale, live):
    """A concurrency key of limit 1 shared by three daemons: runs started on
    all of them never overlap, and a kill -9 of the daemon whose run holds
    the slot loses neither the run nor the slot (spec/flow-control.md)."""
    turns = f"{scale.root}/turns"
    script = f'echo "start $1 $(date +%s.%N)" >> {turns}; sleep 0.4; echo "end $1 $(date +%s.%N)" >> {turns}'
    call(live[0], "opcode.define", {"name": "exclusive", "definition": {
        "concurrency": {"key": "the-one", "limit": 1},
        "inputs": {"tag": {"type": "string"}},
        "steps": [{"id": "work", "action": "shell.exec",
                   "params": {"command": "sh", "args": ["-c", script, "sh", "${{inputs.tag}}"]}}]}})
    ids = [call(live[n % len(live)], "opcode.run", {"template_name": "exclusive", "params": {"tag": f"x{n}"},
                                                     "wait": False})["workflow_id"] for n in range(9)]

    def holder():
        rows = psql(scale.url, "SELECT w.lease_owner FROM run_slots s JOIN workflows w ON w.id = s.workflow_id "
                    "WHERE s.held = 1 AND w.status = 'active' AND s.key = 'exclusive:the-one'")
        return rows[0][0] if rows and rows[0][0] else None
    owner = within(holder, 20)
    victim = next((d for d in live if owner and scale.owner_of(d) in owner), None)
    ex.that(victim is not None, f"one at a time: a daemon holds the slot ({owner})")
    if victim is not None:
        victim.process.kill()
        victim.process.wait()
    placeholders = ",".join(f"'{i}'" for i in ids)

    def done():
        rows = psql(scale.url, f"SELECT status FROM workflows WHERE id IN ({placeholders})")
        return len(rows) == len(ids) and all(r[0] == "completed" for r in rows)
    ex.that(within(done, 90) is not None, "one at a time: every run of the key completed on the daemons left")
    spans = {}
    for line in open(turns).read().splitlines():
        what, tag, at = line.split()
        spans.setdefault(tag, {})[what] = float(at)
    # A run's last attempt (one killed midway ran again elsewhere).
    finished = sorted((s["start"], s["end"], tag) for tag, s in spans.items() if "end" in s)
    overlaps = [(a[2], b[2]) for a, b in zip(finished, finished[1:]) if b[0] < a[1]]
    ex.that(len(finished) == len(ids) and not overlaps,
            f"one at a time: {len(finished)} runs finished, overlapping: {overlaps}")
    ex.section("a concurrency key of limit 1 on three daemons: no two runs overlap; "
               "kill -9 of the slot's holder loses neither run nor slot")


def main():
    binary = os.path.abspath(sys.argv[1])
    ex = Expectations()
    root = tempfile.mkdtemp(prefix="opcode-scale-")
    os.chmod(root, 0o755)
    scale = Scale(binary, root)
    try:
        a, b, c = scale.start("a"), scale.start("b"), scale.start("c")
        call(a, "opcode.define", {"name": "chain", "definition": scale.chain()})
        call(a, "opcode.define", {"name": "waiting", "definition": scale.waiting()})
        signal_elsewhere(ex, scale, a, b, c)
        cron_once(ex, scale, c)
        kill_one(ex, scale, a, [b, c])
        d = scale.start("d")
        freeze_one(ex, scale, b)
        restart_database(ex, scale)
        signal_elsewhere(ex, scale, c, d, b)
        one_at_a_time(ex, scale, [b, c, d])
    finally:
        scale.stop()
    ex.done()


if __name__ == "__main__":
    main()
