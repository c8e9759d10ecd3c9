"""The session soak (not in the default test run; tests/session-soak runs
it): opens N Streamable HTTP sessions (2025-11-25 revision) and never
closes them, then checks the daemon kept at most `limits.sessions` (1,000) of them
and that its memory comes back near its baseline once they expire
(`limits.session_idle`).

Usage: sessions_soak.py OPCODE_BINARY [SESSIONS]"""

import http.client
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mcp"))

from daemon import Daemon, free_port  # noqa: E402

IDLE_SECONDS = 20


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def post(connection, body, session=None):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if session:
        headers["Mcp-Session-Id"] = session
    connection.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    response = connection.getresponse()
    data = response.read()
    return response.status, response.getheader("Mcp-Session-Id"), data


def open_session(connection, n):
    status, session, _ = post(connection, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": f"soak-{n}", "version": "1"}}})
    assert status == 200 and session, f"initialize {n}: {status}"
    status, _, _ = post(connection, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert status == 202, f"initialized {n}: {status}"
    status, _, data = post(connection, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    assert status == 200 and b"opcode.run" in data, f"tools/list {n}: {status}"
    return session


def main():
    binary = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(f"{home}/.opcode")
        with open(f"{home}/.opcode/settings.json", "w") as f:
            # The default cap (1,000 sessions); a short idle expiry.
            json.dump({"limits": {"session_idle": f"{IDLE_SECONDS}s"}}, f)
        daemon = Daemon(binary, home, free_port(), log=f"{home}/daemon.log")
        daemon.start()
        try:
            pid = daemon.process.pid
            connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
            open_session(connection, -1)
            baseline = rss_mb(pid)
            started = time.time()
            sessions = [open_session(connection, n) for n in range(count)]
            opened = time.time() - started
            peak = rss_mb(pid)
            print(f"{count} sessions opened in {opened:.1f} s; RSS {baseline:.0f} MB before, {peak:.0f} MB after")
            # The oldest were closed to make room: they get 404, as MCP says.
            status, _, _ = post(connection, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, sessions[0])
            assert status == 404, f"the oldest session still answers: {status}"
            status, _, _ = post(connection, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, sessions[-1])
            assert status == 200, f"the newest session does not answer: {status}"
            # Nothing touches them now: each expires after IDLE_SECONDS.
            deadline = time.time() + IDLE_SECONDS * 4
            while rss_mb(pid) > baseline + 20 and time.time() < deadline:
                time.sleep(1)
            now = rss_mb(pid)
            status, _, _ = post(connection, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, sessions[-1])
            assert status == 404, f"the newest session still answers after {IDLE_SECONDS} s idle: {status}"
            assert now <= baseline + 20, f"RSS {now:.0f} MB after every session expired (baseline {baseline:.0f})"
            print(f"after idle expiry: RSS {now:.0f} MB (baseline {baseline:.0f} MB); every session closed")
            status, _, _ = post(connection, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "late", "version": "1"}}})
            assert status == 200, "a new session after the soak"
            print("ok - sessions bounded and expired; memory back near baseline")
        finally:
            daemon.terminate()


if __name__ == "__main__":
    main()
