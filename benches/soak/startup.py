"""Start-up and queries at scale (issue 24, item 5): a database of
FINISHED completed runs and SUSPENDED runs waiting on a decision, made
through the release daemon over /mcp (16 clients); then, START times:
`opcode serve` from spawn until /readyz answers 200, and the p50 of
`opcode.query` pages over a kept-alive connection; last, INTERRUPTED runs
killed mid-step with kill -9, and the time until the restarted daemon is
ready and until they have all completed. Not part of the test run.

Usage: python3 benches/soak/startup.py PATH_TO_OPCODE [--finished 100000]
           [--suspended 10000] [--interrupted 200] [--starts 5] [--home DIR]
(--home keeps the database between sittings: it is filled only once.)
"""

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "mcp"))

from daemon import Daemon, free_port  # noqa: E402
from mcp_call import call  # noqa: E402

ONE = {"steps": [{"id": "h", "action": "crypto.hash", "params": {"data": "${{inputs.n}}"}}]}
GATE = {"steps": [{"id": "approve", "type": "reasoning", "config": {
    "prompt_context": "Ship it?", "options": [{"id": "yes"}, {"id": "no"}]}}]}
NAP = {"steps": [{"id": "nap", "type": "wait", "config": {"duration": "3s"}},
                 {"id": "h", "action": "crypto.hash", "params": {"data": "after"}, "depends_on": ["nap"]}]}


def tool(connection, name, arguments):
    result = call(connection, name, arguments)
    if result.get("isError"):
        raise RuntimeError(f"{name}: {result}")
    return result["structuredContent"]


def fill(port, template, count, clients=16):
    left, lock = [count], threading.Lock()

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port)
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
                n = left[0]
            tool(connection, "opcode.run", {"template_name": template, "params": {"n": str(n)}})

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def ready_after(binary, home, port, env):
    """Seconds from spawn to /readyz 200, and the process."""
    started = time.perf_counter()
    process = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--db", f"{home}/opcode.db"],
                               env=dict(os.environ, HOME=home, **env), stderr=open(f"{home}/daemon.log", "a"))
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return time.perf_counter() - started, process
        except OSError:
            pass
        if process.poll() is not None:
            raise SystemExit(open(f"{home}/daemon.log").read()[-2000:])
        time.sleep(0.002)


def page_p50(port, arguments, times=50):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    tool(connection, "opcode.query", arguments)
    took = []
    for _ in range(times):
        started = time.perf_counter()
        tool(connection, "opcode.query", arguments)
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--suspended", type=int, default=10_000)
    parser.add_argument("--interrupted", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--home")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    home = args.home or tempfile.mkdtemp()
    env = {"OPCODE_LOG_LEVEL": "warn"}
    port = free_port()
    if not os.path.exists(f"{home}/opcode.db"):
        daemon = Daemon(binary, home, port, env=env, log=f"{home}/daemon.log")
        daemon.start()
        setup = http.client.HTTPConnection("127.0.0.1", port)
        for name, definition in [("one", ONE), ("gate", GATE), ("nap", NAP)]:
            tool(setup, "opcode.define", {"name": name, "definition": definition})
        started = time.time()
        fill(port, "one", args.finished)
        fill(port, "gate", args.suspended)
        print(f"filled {args.finished} finished and {args.suspended} suspended runs in "
              f"{time.time() - started:.0f} s")
        daemon.terminate()
    size = sum(os.path.getsize(f"{home}/{f}") for f in os.listdir(home) if f.startswith("opcode.db"))
    print(f"database: {size / 1e6:.0f} MB")
    starts = []
    for _ in range(args.starts):
        took, process = ready_after(binary, home, port, env)
        starts.append(took)
        process.terminate()
        process.wait()
    print(f"ready after (s): {', '.join(f'{t:.3f}' for t in starts)}; median {statistics.median(starts):.3f}")
    took, process = ready_after(binary, home, port, env)
    for label, arguments in [
        ("workflows, first page of 50", {"resource": "workflows"}),
        ("workflows, suspended, first page", {"resource": "workflows", "filter": {"status": "suspended"}}),
        ("workflows, template one, page 100", {"resource": "workflows", "filter": {"template_name": "one"},
                                               "offset": 5000}),
        ("decisions, pending, first page", {"resource": "decisions"}),
        ("templates", {"resource": "templates"}),
    ]:
        print(f"opcode.query {label}: p50 {page_p50(port, arguments):.2f} ms")
    if args.interrupted:
        connection = http.client.HTTPConnection("127.0.0.1", port)
        ids = [tool(connection, "opcode.run", {"template_name": "nap", "wait": False})["workflow_id"]
               for _ in range(args.interrupted)]
        time.sleep(0.5)
        process.kill()
        process.wait()
        took, process = ready_after(binary, home, port, env)
        started = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port)
        for run in ids:
            while tool(connection, "opcode.status", {"workflow_id": run})["status"] != "completed":
                time.sleep(0.05)
        print(f"after kill -9 with {len(ids)} runs mid-step: ready after {took:.3f} s, "
              f"all completed {time.perf_counter() - started:.1f} s later")
    process.terminate()
    process.wait()


if __name__ == "__main__":
    main()
