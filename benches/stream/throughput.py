"""How fast stream triggers turn messages into runs (spec/triggers-stream.md),
on one daemon over its default libSQL store, for each broker kind: N
messages are published at once to a template of one `workflow.log` step;
the clock runs from the publish until every run is started (the daemon's
`opcode_stream_messages_total{outcome="started"}`) and until every run has
completed (`opcode_workflows{status="completed"}`).

Usage: python benches/stream/throughput.py PATH_TO_OPCODE [MESSAGES] [PATH_TO_TANSU]
(a release build: `cargo build --release -p opcode-daemon --bin opcode`).
Needs Debian's redis-server and nats-server (tests/stream/run installs them);
with PATH_TO_TANSU, Kafka too (tansu's memory storage, a topic of one
partition), run with target/stream-venv/bin/python for confluent-kafka.
"""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "stream"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "hostile"))

from common import call, daemon, get, wait_for  # noqa: E402
from stream import Nats, Redis  # noqa: E402


def metric(d, prefix):
    for line in get(d, "/metrics")[1].splitlines():
        if line.startswith(prefix):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def measure(binary, root, kind, broker, send, count):
    d = daemon(binary, f"{root}/{kind}", {"isolation": {"enabled": False}, "brokers": {"b": broker}})
    try:
        call(d, "opcode.define", {"name": "bench", "triggers": {"stream": {"broker": "b", "topic": "bench.in"}},
                                  "definition": {"steps": [{"id": "log", "action": "workflow.log",
                                                            "params": {"message": "${{inputs.n}}"}}]}})
        wait_for("the consumer", lambda: 'opcode_stream_pending{template="bench"' in get(d, "/metrics")[1], 30)
        began = time.monotonic()
        send(count)
        sent = time.monotonic() - began
        started_at = wait_for("every run started", lambda: metric(
            d, 'opcode_stream_messages_total{outcome="started",template="bench"}') >= count
            and time.monotonic(), 600) - began
        done_at = wait_for("every run completed", lambda: metric(
            d, 'opcode_workflows{status="completed"}') >= count and time.monotonic(), 600) - began
        print(f"{kind:5} {count} messages: published in {sent:.2f} s; all started after {started_at:.2f} s "
              f"({count / started_at:,.0f}/s); all completed after {done_at:.2f} s ({count / done_at:,.0f}/s)")
    finally:
        d.terminate()


def kafka(binary, root, tansu, count):
    from kafka import Kafka  # confluent-kafka: only where Kafka is measured

    broker = Kafka(tansu, root)
    try:
        broker.topic("bench.in", 1)
        measure(binary, root, "kafka", {"kafka": broker.servers},
                lambda n: broker.send("bench.in", [(None, {"id": str(i)}, json.dumps({"n": i})) for i in range(n)],
                                      batched=True),
                count)
    finally:
        broker.stop()


def main(binary, count, tansu):
    with tempfile.TemporaryDirectory() as root:
        redis, nats = Redis(root), Nats(root)
        try:
            measure(binary, root, "redis", {"redis": redis.url},
                    lambda n: redis.send("bench.in", [{"body": json.dumps({"n": i})} for i in range(n)]), count)
            measure(binary, root, "nats", {"nats": nats.url},
                    lambda n: nats.send("bench.in", [({"id": str(i)}, json.dumps({"n": i})) for i in range(n)]),
                    count)
            if tansu:
                kafka(binary, root, tansu, count)
        finally:
            redis.stop()
            nats.stop()


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2000,
         os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None)
