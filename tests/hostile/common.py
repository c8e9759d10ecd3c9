"""What the hostile-workflow tests share: a daemon on its own HOME and
settings, stateless MCP calls, a watcher that times `/livez` from a process
of its own, and checks that go on after a failure."""

import json
import multiprocessing
import os
import sys
import time
import urllib.error
import urllib.request

import importlib.util

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mcp"))

from daemon import Daemon, free_port  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "security_common", os.path.join(os.path.dirname(__file__), "..", "security", "common.py"))
_security = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_security)
# Checks that go on after a failure, as the attack tests print them.
Expectations, check = _security.Expectations, _security.check


def daemon(binary, home, settings=None, port=None, db=None):
    """`opcode serve` with `settings` in HOME/.opcode/settings.json, logging
    to HOME/daemon.log, on the database `db` (HOME/opcode.db); started."""
    os.makedirs(f"{home}/.opcode", exist_ok=True)
    with open(f"{home}/.opcode/settings.json", "w") as f:
        json.dump(settings or {}, f)
    running = Daemon(os.path.abspath(binary), home, port or free_port(), log=f"{home}/daemon.log", cwd=home, db=db)
    running.start()
    return running


def rpc(daemon, body, timeout=120):
    """A raw stateless (2026-07-28) JSON-RPC POST to /mcp: (status, answer)."""
    request = urllib.request.Request(f"{daemon.url}/mcp", data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": body.get("method", ""),
        "Mcp-Name": body.get("params", {}).get("name", "")})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def call(daemon, tool, arguments, timeout=120):
    """One `tools/call`; the tool's structured result (an error is
    `{"error": {code, name, message, details?}}`)."""
    status, answer = rpc(daemon, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}, timeout)
    check(status == 200 and isinstance(answer, dict) and "result" in answer, f"{tool}: {status} {str(answer)[:2000]}")
    result = answer["result"]
    return result.get("structuredContent") or json.loads(result["content"][0]["text"])


def diagnostic_codes(result):
    """The codes of an R0123 refusal's diagnostics."""
    details = result.get("error", {}).get("details") or {}
    return [d["code"] for d in details.get("diagnostics", [])]


def get(daemon, path, timeout=10):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(f"{daemon.url}{path}", timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(what, predicate, seconds):
    """Polls `predicate` until it gives something true; that value."""
    deadline = time.time() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.1)


def within(predicate, seconds):
    """`predicate`'s first true value within `seconds`, else None."""
    try:
        return wait_for("", predicate, seconds)
    except AssertionError:
        return None


# How long `/livez` may take, however loaded the machine, before the daemon
# counts as not answering.
LIVEZ_BOUND_MS = 2000


def _watch(url, stop, worst, slow):
    import http.client
    from urllib.parse import urlparse
    where = urlparse(url)
    connection = None
    while not stop.is_set():
        started = time.monotonic()
        try:
            if connection is None:
                connection = http.client.HTTPConnection(where.hostname, where.port, timeout=5)
            connection.request("GET", "/livez")
            response = connection.getresponse()
            response.read()
            ok = response.status == 200
        except OSError:
            connection, ok = None, False
        took = (time.monotonic() - started) * 1000 if ok else 5000.0
        with worst.get_lock():
            worst.value = max(worst.value, took)
        if took > LIVEZ_BOUND_MS:
            with slow.get_lock():
                slow.value += 1
        time.sleep(0.05)


class LivezWatch:
    """Times `/livez` every 50 ms from another process while the tests run:
    the slowest answer, and how many took over `LIVEZ_BOUND_MS` (or failed).
    The bound is one a loaded 2-core machine holds: the check is that the
    daemon keeps answering, not how fast (latency is a benchmark's)."""

    def __init__(self, daemon):
        self.stop = multiprocessing.Event()
        self.worst = multiprocessing.Value("d", 0.0)
        self.slow = multiprocessing.Value("i", 0)
        self.process = multiprocessing.Process(target=_watch, args=(daemon.url, self.stop, self.worst, self.slow),
                                               daemon=True)
        self.process.start()

    def finish(self):
        self.stop.set()
        self.process.join(10)
        return self.worst.value, self.slow.value
