"""Reloads never open the door (spec/security.md, "Network clients"): a
daemon listening off loopback, its token in settings.json only, is sent
SIGHUP after each of the edits a careless operator makes. Each reload a
start would refuse is refused whole: anonymous `/mcp`, `/metrics` and
`/livez` stay 401 and the token in force still works. Tokens of spaces, or
with a tab, are refused at start as at a reload.

Usage: python reload.py PATH_TO_OPCODE
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from common import Expectations

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mcp"))
from daemon import free_port  # noqa: E402

FIRST = "first-reload-token-0123456789"
SECOND = "second-reload-token-0123456789"


def status(port, path, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError:
        return None  # Not listening (yet).


def write(home, settings):
    with open(f"{home}/.opcode/settings.json", "w") as f:
        json.dump(settings, f)


def reload(process, log, settings, home):
    """Writes `settings`, sends SIGHUP and waits for the daemon's verdict."""
    before = open(log).read().count("settings ")
    write(home, settings)
    process.send_signal(signal.SIGHUP)
    deadline = time.time() + 15
    while open(log).read().count("settings ") == before:
        if time.time() > deadline:
            raise AssertionError("no word on the reload: " + open(log).read()[-2000:])
        time.sleep(0.05)
    return open(log).read().splitlines()[-1]


def refused_at_start(binary, expect):
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(f"{home}/.opcode")
        for token in [" " * 24, "\t" + FIRST, FIRST + " ", FIRST[:10] + " " + FIRST[10:]]:
            write(home, {"token": token})
            done = subprocess.run([binary, "serve", "--listen", f"0.0.0.0:{free_port()}", "--db", f"{home}/o.db"],
                                  env=dict(os.environ, HOME=home), capture_output=True, text=True, timeout=30)
            expect.that(done.returncode == 2 and "token" in done.stderr, f"token {token!r} at start: {done}")
    expect.section("tokens of spaces, or with a tab or a space, are refused at start")


def reloads(binary, expect):
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(f"{home}/.opcode")
        write(home, {"token": FIRST})
        port, log = free_port(), f"{home}/daemon.log"
        env = {k: v for k, v in os.environ.items() if k != "OPCODE_TOKEN"}
        process = subprocess.Popen([binary, "serve", "--listen", f"0.0.0.0:{port}", "--db", f"{home}/o.db"],
                                   env=dict(env, HOME=home), stderr=open(log, "w"))
        try:
            deadline = time.time() + 30
            while status(port, "/livez", FIRST) != 200:
                if time.time() > deadline or process.poll() is not None:
                    raise AssertionError("the daemon did not start: " + open(log).read())
                time.sleep(0.05)
            careless = [{}, {"token": ""}, {"token": "short"}, {"token": " " * 24}, {"token": "\t" + SECOND},
                        {"token": SECOND + "\n"}, {"token": None}, {"log_level": "debug"}]
            for settings in careless:
                said = reload(process, log, settings, home)
                expect.that("not reloaded" in said, f"{settings}: the daemon said {said}")
                for path in ("/mcp", "/metrics", "/livez"):
                    code = status(port, path)
                    expect.that(code == 401, f"after reloading {settings}, anonymous {path} answers {code}")
                expect.that(status(port, "/livez", FIRST) == 200, f"after {settings}, the token in force is refused")
            expect.section("a reload a start would refuse is refused whole: the door stays shut, the token stays")
            said = reload(process, log, {"token": SECOND}, home)
            expect.that("settings reloaded" in said, f"a good token: {said}")
            expect.that(status(port, "/livez", SECOND) == 200, "the new token is refused")
            expect.that(status(port, "/livez") == 401, "anonymous passes after a good reload")
            expect.section("a good token is reloaded")
        finally:
            process.terminate()
            process.wait(timeout=15)


def main(binary):
    expect = Expectations()
    refused_at_start(binary, expect)
    reloads(binary, expect)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
