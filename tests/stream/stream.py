"""Templates started by messages of a Redis stream (spec/triggers-stream.md),
with a real redis-server from Debian on a free port:

1. One daemon on libSQL: each message starts one run with its params; a
   message sent again (same id) starts nothing; messages that do not map
   (not JSON, params against the input_schema) go to `<topic>.dead-letter`
   with their code, and show in /metrics and the panel; lag is exported;
   back-pressure stops reading at max_backlog runs not ended.
2. Three daemons on one PostgreSQL: 1,000 messages, one daemon killed -9
   in the middle: every message started exactly one run, none lost (the
   dead daemon's unacknowledged messages were claimed by the others).
3. NATS JetStream (Debian's nats-server) behind the same trigger: runs,
   a duplicate, a dead letter; a daemon killed -9 while it holds messages
   and started again: every message one run, nothing left unacknowledged.

Usage: python stream.py PATH_TO_OPCODE
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))

from common import Expectations, call, daemon, get, wait_for  # noqa: E402
from daemon import free_port  # noqa: E402

CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "postgres", "cluster")

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def listening(port):
    """Whether something accepts connections on the loopback `port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class Redis:
    def __init__(self, root):
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis-server", lambda: self.cli("PING") == "PONG", 20)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args):
        done = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True)
        return done.stdout.strip()

    def send(self, topic, messages):
        """XADDs each message (a dict of fields) in one pipe."""
        def quoted(text):
            return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines = "".join(f"XADD {topic} * " + " ".join(f"{k} {quoted(v)}" for k, v in m.items()) + "\n"
                        for m in messages)
        subprocess.run(["redis-cli", "-p", str(self.port)], input=lines, text=True, capture_output=True, check=True)

    def stop(self):
        self.process.kill()
        self.process.wait()


class Nats:
    def __init__(self, root):
        self.port = free_port()
        os.makedirs(f"{root}/nats", exist_ok=True)
        self.process = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", f"{root}/nats"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("nats-server", self.answers, 20)

    @property
    def url(self):
        return f"nats://127.0.0.1:{self.port}"

    def answers(self):
        return listening(self.port)

    def send(self, subject, messages):
        """Publishes each (headers, body) with the raw protocol, then waits for the server's PONG."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.recv(4096)
            out = [b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n']
            for headers, body in messages:
                head = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
                data = body.encode()
                out.append(f"HPUB {subject} {len(head)} {len(head) + len(data)}\r\n".encode() + head + data + b"\r\n")
            out.append(b"PING\r\n")
            s.sendall(b"".join(out))
            seen = b""
            while b"PONG" not in seen:
                seen += s.recv(4096)

    def stop(self):
        self.process.kill()
        self.process.wait()


def postgres(root):
    """A throw-away PostgreSQL cluster in ROOT/pg with a database `opcode`:
    its folder and the database's URL."""
    cluster = f"{root}/pg"
    started = subprocess.run([CLUSTER, "start", cluster], capture_output=True, text=True, check=True)
    admin = started.stdout.strip()
    subprocess.run(["psql", admin, "-qc", "CREATE DATABASE opcode"], check=True, capture_output=True)
    return cluster, admin.rsplit("/", 1)[0] + "/opcode"


def stop(daemons, cluster):
    """Kills what is left of `daemons`, then stops the PostgreSQL `cluster`."""
    for d in daemons:
        if d.process.poll() is None:
            d.process.kill()
            d.process.wait()
    subprocess.run([CLUSTER, "stop", cluster], check=False)


def runs_of(d, template):
    found = call(d, "opcode.query", {"resource": "workflows", "filter": {"template_name": template, "limit": 5000}})
    return found.get("workflows", [])


def completed(d, template, count):
    runs = runs_of(d, template)
    return len(runs) >= count and all(r["status"] == "completed" for r in runs) and runs


def one_daemon(binary, root, redis, expect):
    home = f"{root}/one"
    brokers = {"events": {"redis": redis.url, "topics": ["missions", "gated"]}}
    d = daemon(binary, home, {"isolation": {"enabled": False}, "brokers": brokers})
    try:
        trigger = {"broker": "events", "topic": "missions", "id": "/mission", "claim_after": "2s"}
        defined = call(d, "opcode.define", {"name": "intake", "input_schema": SCHEMA, "triggers": {"stream": trigger},
                                            "definition": {"steps": [{"id": "log", "action": "workflow.log",
                                                                      "params": {"message": "n=${{inputs.n}}"}}]}})
        expect.that(defined.get("version") == "v1", f"define: {defined}")
        refused = call(d, "opcode.define", {"name": "elsewhere", "triggers": {"stream": {"broker": "nope", "topic": "t"}},
                                            "definition": {"steps": [{"id": "a", "action": "workflow.log",
                                                                      "params": {"message": "x"}}]}})
        expect.that(refused.get("error", {}).get("code") == "R0122"
                    and refused["error"]["details"]["pointer"] == "/triggers/stream/broker"
                    and "events" in refused["error"]["message"], f"an unknown broker: {refused}")
        refused = call(d, "opcode.define", {"name": "snoop", "triggers": {"stream": {"broker": "events", "topic": "payroll"}},
                                            "definition": {"steps": [{"id": "a", "action": "workflow.log",
                                                                      "params": {"message": "x"}}]}})
        expect.that(refused.get("error", {}).get("code") == "R0122"
                    and refused["error"]["details"]["pointer"] == "/triggers/stream/topic",
                    f"a topic the settings do not allow: {refused}")
        redis.send("missions", [{"body": json.dumps({"n": i, "mission": f"m{i}"})} for i in range(20)])
        runs = wait_for("20 runs", lambda: completed(d, "intake", 20), 60)
        expect.that(len(runs) == 20, f"runs: {len(runs)}")
        expect.section("each message starts one run of the template, its body the params")

        redis.send("missions", [{"body": json.dumps({"n": 3, "mission": "m3"})},
                                {"body": "not json"}, {"body": json.dumps({"n": "three", "mission": "x"})},
                                {"body": json.dumps({"n": 99, "mission": "m99"})}])
        wait_for("the last message", lambda: completed(d, "intake", 21), 30)
        dead = wait_for("two dead letters", lambda: redis.cli("XLEN", "missions.dead-letter") == "2", 30)
        letters = redis.cli("XRANGE", "missions.dead-letter", "-", "+")
        expect.that(dead and "R0137" in letters and "R0108" in letters and "not json" in letters, f"dead letters: {letters}")
        expect.that(len(runs_of(d, "intake")) == 21, f"a message sent again started a run: {len(runs_of(d, 'intake'))}")
        pending = redis.cli("XPENDING", "missions", "opcode-intake")
        expect.that(pending.splitlines()[0] == "0", f"unacknowledged: {pending}")
        lag = 'opcode_stream_lag{template="intake",topic="missions"} 0'
        metrics = wait_for("the lag measured", lambda: (m := get(d, "/metrics")[1]) and lag in m and m, 15)
        expect.that('opcode_stream_dead_letters_total{code="R0137",template="intake"} 1' in metrics
                    and 'opcode_stream_messages_total{outcome="duplicate",template="intake"} 1' in metrics,
                    "metrics: " + "\n".join(l for l in metrics.splitlines() if "stream" in l))
        status, page = get(d, "/triggers")
        expect.that(status == 200 and "R0137" in page and "not JSON" in page and "missions.dead-letter" in page,
                    f"the panel's triggers page: {status} {page[:300]}")
        expect.section("a message sent again starts nothing; unmappable ones are dead-lettered with their code, "
                       "counted in /metrics and listed in the panel; lag exported")

        gate = {"name": "gated", "input_schema": SCHEMA,
                "triggers": {"stream": {"broker": "events", "topic": "gated", "max_backlog": 3}},
                "definition": {"steps": [{"id": "wait", "type": "wait", "config": {"signal": "go"}}]}}
        call(d, "opcode.define", gate)
        redis.send("gated", [{"body": json.dumps({"n": i})} for i in range(10)])
        wait_for("3 waiting runs", lambda: len(runs_of(d, "gated")) == 3, 30)
        time.sleep(3)
        _, metrics = get(d, "/metrics")
        expect.that(len(runs_of(d, "gated")) == 3 and 'opcode_stream_paused{template="gated"} 1' in metrics
                    and 'opcode_stream_lag{template="gated",topic="gated"} 7' in metrics,
                    "back-pressure: " + "\n".join(l for l in metrics.splitlines() if "gated" in l))
        for run in runs_of(d, "gated"):
            call(d, "opcode.signal", {"workflow_id": run["id"], "signal_type": "signal", "payload": {"name": "go"}})
        wait_for("more runs after the backlog drained", lambda: len(runs_of(d, "gated")) > 3, 30)
        expect.section("back-pressure: reading stops at max_backlog runs not ended (paused, lag kept) and resumes")
    finally:
        d.terminate()


def three_daemons(binary, root, redis, expect):
    cluster, url = postgres(root)
    settings = {"isolation": {"enabled": False}, "lease_ttl": "3s", "brokers": {"bus": {"redis": redis.url}}}
    daemons = []
    try:
        # b alone first: it reads, and is killed with messages read and not
        # acknowledged; a and c then take those over (claim_after) and read on.
        b = daemon(binary, f"{root}/b", settings, db=url)
        daemons.append(b)
        trigger = {"broker": "bus", "topic": "work", "id": "/k", "claim_after": "2s", "max_backlog": 1000}
        call(b, "opcode.define", {"name": "worker", "input_schema": SCHEMA, "triggers": {"stream": trigger},
                                  "definition": {"steps": [{"id": "log", "action": "workflow.log",
                                                            "params": {"message": "n=${{inputs.n}}"}}]}})
        wait_for("b's consumer group", lambda: "opcode-worker" in redis.cli("XINFO", "GROUPS", "work"), 30)
        redis.send("work", [{"body": json.dumps({"n": i, "k": f"k{i}"})} for i in range(500)])

        def unacknowledged():
            summary = redis.cli("XPENDING", "work", "opcode-worker").splitlines()
            return int(summary[0]) if summary and summary[0].isdigit() else 0

        def frozen_holding():
            """b frozen (SIGSTOP) while it holds messages it read: then no ack can come."""
            if not unacknowledged():
                return 0
            b.process.send_signal(signal.SIGSTOP)
            held = unacknowledged()
            if not held:
                b.process.send_signal(signal.SIGCONT)
            return held
        held = wait_for("b holding messages it read", frozen_holding, 60)
        b.kill()
        for name in ("a", "c"):
            daemons.append(daemon(binary, f"{root}/{name}", settings, db=url))
        a, c = daemons[1], daemons[2]
        redis.send("work", [{"body": json.dumps({"n": i, "k": f"k{i}"})} for i in range(500, 1000)])
        redis.send("work", [{"body": "{poison"}])
        runs = wait_for("1,000 runs", lambda: completed(a, "worker", 1000), 240)
        ids = [r["id"] for r in runs]
        expect.that(len(runs) == 1000 and len(set(ids)) == 1000, f"runs: {len(runs)}, distinct {len(set(ids))}")
        pending = wait_for("nothing unacknowledged",
                           lambda: redis.cli("XPENDING", "work", "opcode-worker").splitlines()[0] == "0", 30)
        expect.that(pending and redis.cli("XLEN", "work.dead-letter") == "1", "the poison message's dead letter")
        counted = {}
        for d in (a, c):
            _, metrics = get(d, "/metrics")
            for line in metrics.splitlines():
                if line.startswith('opcode_stream_messages_total{outcome="started"'):
                    counted[d.port] = int(float(line.rsplit(" ", 1)[1]))
        expect.that(sum(counted.values()) >= 1, f"the live daemons started runs: {counted}")
        for d in (a, c):
            page = wait_for("the dead letter in the panel", lambda: "R0137" in get(d, "/triggers")[1], 15)
            expect.that(page, f"daemon {d.port}'s panel lists the poison message, whoever dead-lettered it")
        print(f"  kill -9 with {held} message(s) read and not acknowledged; taken over by the others")
        expect.section("three daemons on PostgreSQL, one killed -9 midway: 1,000 messages, 1,000 runs, none twice; "
                       "the poison message dead-lettered")
    finally:
        stop(daemons, cluster)


def nats_daemon(binary, root, redis, expect):
    nats = Nats(root)
    home = f"{root}/nats-home"
    settings = {"isolation": {"enabled": False}, "brokers": {"js": {"nats": nats.url}}}
    d = daemon(binary, home, settings)
    try:
        both = {"brokers": {"events": {"redis": redis.url}, "js": {"nats": nats.url}}}
        with open(f"{root}/doctor.json", "w") as f:
            json.dump(both, f)
        doctor = subprocess.run([binary, "doctor", "--json", "--config", f"{root}/doctor.json", "--db",
                                 f"{root}/doctor.db", "--listen", f"127.0.0.1:{free_port()}"],
                                capture_output=True, text=True)
        brokers = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "brokers"]
        expect.that(brokers and brokers[0]["status"] == "ok" and "redis 7" in brokers[0]["detail"]
                    and "with JetStream" in brokers[0]["detail"], f"doctor: {brokers}")
        expect.section("opcode doctor says each broker answers, and what it runs")
        trigger = {"broker": "js", "topic": "orders.new", "claim_after": "2s"}
        call(d, "opcode.define", {"name": "orders", "input_schema": SCHEMA, "triggers": {"stream": trigger},
                                  "definition": {"steps": [{"id": "log", "action": "workflow.log",
                                                            "params": {"message": "n=${{inputs.n}}"}}]}})
        wait_for("the consumer", lambda: 'opcode_stream_pending{template="orders"' in get(d, "/metrics")[1], 30)
        nats.send("orders.new", [({"id": f"o{i}"}, json.dumps({"n": i})) for i in range(20)])
        nats.send("orders.new", [({"id": "o3"}, json.dumps({"n": 3})), ({"id": "bad"}, "{not json")])
        wait_for("20 runs", lambda: completed(d, "orders", 20), 60)
        page = wait_for("the dead letter", lambda: (p := get(d, "/triggers")[1]) and "R0137" in p and p, 30)
        _, metrics = get(d, "/metrics")
        expect.that(len(runs_of(d, "orders")) == 20 and "orders.new.dead-letter" in page
                    and 'opcode_stream_messages_total{outcome="duplicate",template="orders"} 1' in metrics,
                    "NATS: " + "\n".join(l for l in metrics.splitlines() if "stream" in l and "#" not in l))
        expect.section("NATS JetStream: a run per message, a duplicate starts nothing, a dead letter with its code")

        nats.send("orders.new", [({"id": f"p{i}"}, json.dumps({"n": i})) for i in range(300)])
        wait_for("some runs", lambda: len(runs_of(d, "orders")) >= 60, 60)
        d.kill()
        d.start()
        runs = wait_for("320 runs", lambda: completed(d, "orders", 320), 120)
        metrics = wait_for("nothing unacknowledged", lambda: (m := get(d, "/metrics")[1])
                           and 'opcode_stream_pending{template="orders",topic="orders.new"} 0' in m and m, 30)
        expect.that(len(runs) == 320 and len({r["id"] for r in runs}) == 320 and metrics,
                    f"NATS after a kill -9: {len(runs)} runs")
        expect.section("NATS JetStream: killed -9 and started again, every message one run, none left")
    finally:
        d.terminate()
        nats.stop()


def main(binary):
    expect = Expectations()
    with tempfile.TemporaryDirectory() as root:
        # The cluster runs as the postgres user: it must reach its folder.
        os.chmod(root, 0o755)
        redis = Redis(root)
        try:
            one_daemon(binary, root, redis, expect)
            three_daemons(binary, root, redis, expect)
            nats_daemon(binary, root, redis, expect)
        except Exception:
            print("\n".join(expect.failed + expect.current))
            raise
        finally:
            redis.stop()
    expect.done()


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
