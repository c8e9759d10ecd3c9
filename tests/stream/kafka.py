"""Templates started by messages of a Kafka topic (spec/triggers-stream.md),
against a real Kafka-protocol broker (tansu, built from crates.io by
tests/stream/run) on a free port, driven with confluent-kafka (librdkafka)
as a producer would:

1. One daemon on libSQL: a run per message, its key and headers in
   `headers_as`; a message sent again starts nothing; unmappable messages
   (not JSON, a tombstone, params against the input_schema) go to
   `<topic>.dead-letter` with their code, in /metrics and the panel; the
   daemon makes a topic that is missing; the group's lag is exported;
   back-pressure stops reading at max_backlog runs not ended.
2. Three daemons on one PostgreSQL sharing a topic of three partitions:
   1,000 messages, one daemon frozen and killed -9 midway with runs started
   past its committed offsets: its partitions go to the others, which read
   those messages again and start nothing for them; every message one run,
   none twice, the group's lag 0; a poison message dead-lettered.
3. `opcode doctor` says the cluster answers.

Usage: python kafka.py PATH_TO_OPCODE PATH_TO_TANSU
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hostile"))
sys.path.insert(0, os.path.dirname(__file__))

from common import Expectations, call, daemon, get, wait_for  # noqa: E402
from daemon import free_port  # noqa: E402
from stream import SCHEMA, completed, listening, postgres, runs_of, stop  # noqa: E402

LOG = {"definition": {"steps": [{"id": "log", "action": "workflow.log", "params": {"message": "n=${{inputs.n}}"}}]}}


class Kafka:
    """A tansu broker on a free port, its data in memory."""

    def __init__(self, tansu, root):
        self.port = free_port()
        self.log = open(f"{root}/tansu.log", "w")
        address = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [tansu, "broker", "--listener-url", address, "--advertised-listener-url", address,
             "--storage-engine", "memory://tansu/"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("tansu", lambda: listening(self.port), 60)
        self.admin = AdminClient({"bootstrap.servers": self.servers})

    @property
    def servers(self):
        return f"127.0.0.1:{self.port}"

    def topic(self, name, partitions):
        self.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)

    def partitions(self, name):
        metadata = self.admin.list_topics(name, timeout=10)
        topic = metadata.topics.get(name)
        return sorted(topic.partitions) if topic and not topic.error else []

    def send(self, topic, messages, batched=False):
        """Produces each (key, headers, value); a value of None is a tombstone.
        Unless `batched`, one record a batch: tansu 0.6 gives a partition's
        high watermark as its last batch's base offset + 1, so batches of
        one keep the lag true."""
        settings = {"bootstrap.servers": self.servers}
        if not batched:
            settings["batch.num.messages"] = 1
        producer = Producer(settings)
        for key, headers, value in messages:
            producer.produce(topic, value=value, key=key, headers=headers)
            producer.poll(0)
        left = producer.flush(30)
        assert left == 0, f"{left} message(s) not sent"

    def read_all(self, topic):
        """Every message of `topic`: [(headers dict, value)]."""
        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": f"t-{uuid.uuid4()}",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in self.partitions(topic)])
        out, quiet = [], time.monotonic()
        while time.monotonic() - quiet < 3:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            quiet = time.monotonic()
            headers = {k: (v or b"").decode() for k, v in (message.headers() or [])}
            out.append((headers, (message.value() or b"").decode()))
        consumer.close()
        return out

    def committed(self, group, topic):
        """The group's committed offsets of `topic`, summed."""
        asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in self.partitions(topic)])
        answer = self.admin.list_consumer_group_offsets([asked])[group].result(10)
        return sum(max(tp.offset, 0) for tp in answer.topic_partitions)

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.log.close()


def metric(d, line_start):
    for line in get(d, "/metrics")[1].splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return None


def one_daemon(binary, root, kafka, expect):
    settings = {"isolation": {"enabled": False}, "brokers": {"k": {"kafka": kafka.servers}}}
    d = daemon(binary, f"{root}/one", settings)
    try:
        # The daemon makes the topic (and its dead-letter topic) when missing.
        trigger = {"broker": "k", "topic": "missions", "id": "/mission", "claim_after": "2s",
                   "headers_as": "meta"}
        schema = {"type": "object", "properties": {"n": {"type": "integer"}, "meta": {"type": "object"}},
                  "required": ["n"]}
        steps = {"steps": [{"id": "log", "action": "workflow.log",
                            "params": {"message": "n=${{inputs.n}} key=${{inputs.meta.key}}"}}]}
        defined = call(d, "opcode.define", {"name": "intake", "input_schema": schema,
                                            "triggers": {"stream": trigger}, "definition": steps})
        expect.that(defined.get("version") == "v1", f"define: {defined}")
        made = wait_for("the topic made", lambda: kafka.partitions("missions") and kafka.partitions(
            "missions.dead-letter"), 60)
        expect.that(bool(made), "the daemon made missions and missions.dead-letter")
        kafka.send("missions", [(f"key{i}", {"source": "factory"}, json.dumps({"n": i, "mission": f"m{i}"}))
                                for i in range(20)])
        runs = wait_for("20 runs", lambda: completed(d, "intake", 20), 90)
        expect.that(len(runs) == 20, f"runs: {len(runs)}")
        one = call(d, "opcode.status", {"workflow_id": runs[0]["id"], "include": ["inputs"]})
        meta = json.dumps(one.get("inputs", one)).replace('":"', '": "')
        expect.that('"source": "factory"' in meta and '"key": "key' in meta,
                    f"the key and headers reach headers_as: {meta[:600]}")
        expect.section("Kafka: each message starts one run, its key and headers in headers_as")

        kafka.send("missions", [("key3", {}, json.dumps({"n": 3, "mission": "m3"})), (None, {}, "not json"),
                                ("gone", {}, None), (None, {}, json.dumps({"n": "three", "mission": "x"})),
                                ("key99", {}, json.dumps({"n": 99, "mission": "m99"}))])
        wait_for("the last message", lambda: completed(d, "intake", 21), 60)
        letters = wait_for("three dead letters", lambda: len(x := kafka.read_all("missions.dead-letter")) >= 3 and x, 60)
        codes = sorted(h.get("code") for h, _ in letters)
        expect.that(codes == ["R0108", "R0137", "R0137"] and any(v == "not json" for _, v in letters)
                    and all(h.get("template") == "intake" and ":" in h.get("source_id", "") for h, _ in letters),
                    f"dead letters: {letters}")
        expect.that(len(runs_of(d, "intake")) == 21, f"a message sent again started a run: {len(runs_of(d, 'intake'))}")
        lag = 'opcode_stream_lag{template="intake",topic="missions"} 0'
        metrics = wait_for("the lag measured", lambda: (m := get(d, "/metrics")[1]) and lag in m and m, 30)
        expect.that('opcode_stream_dead_letters_total{code="R0137",template="intake"} 2' in metrics
                    and 'opcode_stream_messages_total{outcome="duplicate",template="intake"} 1' in metrics,
                    "metrics: " + "\n".join(l for l in metrics.splitlines() if "stream" in l and "#" not in l))
        page = wait_for("the panel", lambda: (p := get(d, "/triggers")[1]) and "R0108" in p and p, 30)
        expect.that("R0137" in page and "missions.dead-letter" in page, f"the panel's triggers page: {page[:300]}")
        expect.that(wait_for("all committed", lambda: kafka.committed("opcode-intake", "missions") == 25, 30),
                    f"committed: {kafka.committed('opcode-intake', 'missions')}")
        expect.section("Kafka: a message sent again starts nothing; unmappable ones and a tombstone are "
                       "dead-lettered with their code, counted and listed; every offset committed, lag 0")

        kafka.topic("gated", 2)
        gate = {"name": "gated", "input_schema": SCHEMA,
                "triggers": {"stream": {"broker": "k", "topic": "gated", "max_backlog": 3}},
                "definition": {"steps": [{"id": "wait", "type": "wait", "config": {"signal": "go"}}]}}
        call(d, "opcode.define", gate)
        kafka.send("gated", [(None, {}, json.dumps({"n": i})) for i in range(10)])
        wait_for("3 waiting runs", lambda: len(runs_of(d, "gated")) == 3, 60)
        paused = 'opcode_stream_paused{template="gated"} 1'
        lagging = 'opcode_stream_lag{template="gated",topic="gated"} 7'
        metrics = wait_for("paused with a lag of 7", lambda: (m := get(d, "/metrics")[1]) and paused in m
                           and lagging in m and m, 30)
        time.sleep(2)
        expect.that(len(runs_of(d, "gated")) == 3 and metrics,
                    "back-pressure: " + "\n".join(l for l in get(d, "/metrics")[1].splitlines() if "gated" in l))
        for run in runs_of(d, "gated"):
            call(d, "opcode.signal", {"workflow_id": run["id"], "signal_type": "signal", "payload": {"name": "go"}})
        wait_for("more runs after the backlog drained", lambda: len(runs_of(d, "gated")) > 3, 60)
        expect.section("Kafka back-pressure: reading stops at max_backlog runs not ended (paused, lag kept) and "
                       "resumes")
    finally:
        d.terminate()


def three_daemons(binary, root, kafka, expect):
    cluster, url = postgres(root)
    settings = {"isolation": {"enabled": False}, "lease_ttl": "3s", "brokers": {"bus": {"kafka": kafka.servers}}}
    kafka.topic("work", 3)
    daemons = []
    try:
        # b alone first: it reads every partition and is killed with runs
        # started past what it committed; a and c then get its partitions.
        b = daemon(binary, f"{root}/b", settings, db=url)
        daemons.append(b)
        trigger = {"broker": "bus", "topic": "work", "id": "/k", "claim_after": "2s", "max_backlog": 1000}
        call(b, "opcode.define", {"name": "worker", "input_schema": SCHEMA, "triggers": {"stream": trigger}, **LOG})
        kafka.send("work", [(f"k{i}", {}, json.dumps({"n": i, "k": f"k{i}"})) for i in range(500)])

        def started():
            counted = subprocess.run(["psql", url, "-tAc", "SELECT count(*) FROM workflows WHERE template_name = "
                                      "'worker'"], capture_output=True, text=True, check=True)
            return int(counted.stdout.strip())

        def frozen_ahead():
            """b frozen (SIGSTOP) with runs started past its committed offsets."""
            if started() <= kafka.committed("opcode-worker", "work"):
                return None
            b.process.send_signal(signal.SIGSTOP)
            time.sleep(0.5)  # a commit already on the wire lands
            ahead = started() - kafka.committed("opcode-worker", "work")
            if ahead <= 0:
                b.process.send_signal(signal.SIGCONT)
                return None
            return ahead
        ahead = wait_for("b with runs started past its commits", frozen_ahead, 90)
        b.kill()
        started_by_b, committed = started(), kafka.committed("opcode-worker", "work")
        for name in ("a", "c"):
            daemons.append(daemon(binary, f"{root}/{name}", settings, db=url))
        a, c = daemons[1], daemons[2]
        kafka.send("work", [(f"k{i}", {}, json.dumps({"n": i, "k": f"k{i}"})) for i in range(500, 1000)])
        kafka.send("work", [(None, {}, "{poison")])
        runs = wait_for("1,000 runs", lambda: completed(a, "worker", 1000), 300)
        ids = [r["id"] for r in runs]
        expect.that(len(runs) == 1000 and len(set(ids)) == 1000, f"runs: {len(runs)}, distinct {len(set(ids))}")
        done = wait_for("every offset committed", lambda: kafka.committed("opcode-worker", "work") == 1001, 60)
        expect.that(done, f"committed: {kafka.committed('opcode-worker', 'work')} of 1001")
        letters = kafka.read_all("work.dead-letter")
        expect.that(len(letters) == 1 and letters[0][0].get("code") == "R0137", f"the poison message: {letters}")
        lag = wait_for("lag 0 on both", lambda: all(
            metric(d, 'opcode_stream_lag{template="worker",topic="work"}') == 0 for d in (a, c)), 30)
        expect.that(lag, "the group's lag, on both live daemons")
        for d in (a, c):
            page = wait_for("the dead letter in the panel", lambda: "R0137" in get(d, "/triggers")[1], 30)
            expect.that(page, f"daemon {d.port}'s panel lists the poison message, whoever dead-lettered it")
        duplicates = sum(metric(d, 'opcode_stream_messages_total{outcome="duplicate",template="worker"}') or 0
                         for d in (a, c))
        shares = [int(metric(d, 'opcode_stream_messages_total{outcome="started",template="worker"}') or 0)
                  for d in (a, c)]
        print(f"  kill -9 of b with {started_by_b} run(s) started, {committed} offset(s) committed; "
              f"{int(duplicates)} read again by a and c, which started {shares[0]} and {shares[1]}")
        expect.that(duplicates >= ahead, f"b's {ahead} started, uncommitted message(s) were read again by a and c "
                    f"and started nothing: {duplicates} duplicate(s)")
        expect.section("Kafka: three daemons on PostgreSQL, one killed -9 midway: 1,000 messages, 1,000 runs, "
                       "none twice, every offset committed; the poison message dead-lettered")
    finally:
        stop(daemons, cluster)


def doctor(binary, root, kafka, expect):
    with open(f"{root}/doctor.json", "w") as f:
        json.dump({"brokers": {"k": {"kafka": kafka.servers}, "gone": {"kafka": f"127.0.0.1:{free_port()}"}}}, f)
    answer = subprocess.run([binary, "doctor", "--json", "--config", f"{root}/doctor.json", "--db",
                             f"{root}/doctor.db", "--listen", f"127.0.0.1:{free_port()}"],
                            capture_output=True, text=True, timeout=120)
    brokers = [c for c in json.loads(answer.stdout)["checks"] if c["name"] == "brokers"]
    expect.that(brokers and brokers[0]["status"] == "fail" and "gone (kafka)" in brokers[0]["detail"]
                and "k (kafka)" not in brokers[0]["detail"], f"doctor: {brokers}")
    expect.section("opcode doctor: a Kafka cluster that answers passes, one that does not fails, named")


def main(binary, tansu):
    expect = Expectations()
    with tempfile.TemporaryDirectory() as root:
        # The cluster runs as the postgres user: it must reach its folder.
        os.chmod(root, 0o755)
        kafka = Kafka(tansu, root)
        try:
            one_daemon(binary, root, kafka, expect)
            three_daemons(binary, root, kafka, expect)
            doctor(binary, root, kafka, expect)
        except Exception:
            print("\n".join(expect.failed + expect.current))
            with open(f"{root}/tansu.log") as f:
                print("tansu:", f.read()[-3000:])
            raise
        finally:
            kafka.stop()
    expect.done()


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
