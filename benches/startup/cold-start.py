#!/usr/bin/env python3
"""Cold start of the `opcode` daemon: the time from exec to `/livez`
answering 200, then to `/readyz`, on a fresh database and on one that
exists, N times each; prints the median and the worst.

    python3 benches/startup/cold-start.py [BINARY] [RUNS]
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until_ok(url, deadline):
    while time.perf_counter() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=0.2) as r:
                if r.status == 200:
                    return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.001)
    raise SystemExit(f"{url} never answered")


def start_once(binary, home):
    port = free_port()
    env = dict(os.environ, HOME=home, OPCODE_LOG_LEVEL="warn")
    began = time.perf_counter()
    daemon = subprocess.Popen(
        [binary, "serve", "--listen", f"127.0.0.1:{port}", "--db", f"{home}/opcode.db"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        live = until_ok(f"http://127.0.0.1:{port}/livez", began + 10)
        ready = until_ok(f"http://127.0.0.1:{port}/readyz", began + 10)
    finally:
        daemon.terminate()
        daemon.wait()
    return (live - began) * 1000, (ready - began) * 1000


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/opcode"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(f"{binary}: {os.path.getsize(binary) / 1e6:.1f} MB")
    for label, fresh in (("fresh database", True), ("existing database", False)):
        lives, readies = [], []
        with tempfile.TemporaryDirectory() as kept:
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as new:
                    live, ready = start_once(binary, new if fresh else kept)
                lives.append(live)
                readies.append(ready)
        print(f"{label}: /livez {statistics.median(lives):.1f} ms (worst {max(lives):.1f}), "
              f"/readyz {statistics.median(readies):.1f} ms (worst {max(readies):.1f}) over {runs} starts")


main()
