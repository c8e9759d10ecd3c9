"""Storage under a sustained load (issue 24, item 4): the release daemon
(`opcode serve` on a fresh libSQL file at the durability given) driven by
CLIENTS threads, each running a one-step `fs.stat` workflow over /mcp in a
loop on a kept-alive connection, for SECONDS; every INTERVAL seconds it
prints the runs done, the WAL's size (now, and the most it reached,
sampled every 50 ms) and the database's. With --keep-last N the daemon
runs with `retention: {keep_last: N, every: 5s, tombstone_days: 0}`, so
the database should stop growing once N runs are kept. Not part of the test run: a soak.

Usage: python3 benches/soak/storage.py PATH_TO_OPCODE [--durability normal|full]
           [--seconds 600] [--clients 16] [--interval 10] [--keep-last N]
"""

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "mcp"))

from daemon import Daemon, free_port  # noqa: E402
from mcp_call import call as tool  # noqa: E402

def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--durability", default="normal", choices=["normal", "full"])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--interval", type=float, default=10)
    parser.add_argument("--keep-last", type=int)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        tiny = f"{home}/tiny"
        with open(tiny, "w") as f:
            f.write("x")
        # fs.* may read this folder besides each run's workspace.
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            settings = {"isolation": {"fs": {"read": [home]}}}
            if args.keep_last:
                settings["retention"] = {"keep_last": args.keep_last, "every": "5s", "tombstone_days": 0}
            json.dump(settings, f)
        daemon = Daemon(os.path.abspath(args.binary), home, free_port(),
                        env={"OPCODE_DURABILITY": args.durability, "OPCODE_LOG_LEVEL": "warn"},
                        log=f"{home}/daemon.log")
        daemon.start()
        db = daemon.db
        try:
            setup = http.client.HTTPConnection("127.0.0.1", daemon.port)
            definition = {"steps": [{"id": "s", "action": "fs.stat", "params": {"path": tiny}}]}
            defined = tool(setup, "opcode.define", {"name": "stat1", "definition": definition})
            first = tool(setup, "opcode.run", {"template_name": "stat1"})
            if defined.get("isError") or first.get("structuredContent", {}).get("status") != "completed":
                raise SystemExit(f"the soak's workflow does not run: {defined} {first}")
            done, failed, stop = [0], [0], time.time() + args.seconds

            def client():
                connection = http.client.HTTPConnection("127.0.0.1", daemon.port)
                while time.time() < stop:
                    result = tool(connection, "opcode.run", {"template_name": "stat1"})
                    if result.get("structuredContent", {}).get("status") == "completed":
                        done[0] += 1
                    else:
                        failed[0] += 1

            threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
            wal_most = [0]

            def sample():
                while any(t.is_alive() for t in threads):
                    wal_most[0] = max(wal_most[0], size(db + "-wal"))
                    time.sleep(0.05)
            started = time.time()
            for thread in threads:
                thread.start()
            threading.Thread(target=sample, daemon=True).start()
            print(f"durability={args.durability} clients={args.clients} keep_last={args.keep_last}")
            print("seconds,runs,failed,wal_bytes,wal_most_bytes,db_bytes")
            while any(t.is_alive() for t in threads):
                time.sleep(min(args.interval, max(0.1, stop - time.time() + 0.5)))
                print(f"{time.time() - started:.0f},{done[0]},{failed[0]},{size(db + '-wal')},"
                      f"{wal_most[0]},{size(db)}", flush=True)
        finally:
            daemon.terminate()


if __name__ == "__main__":
    main()
