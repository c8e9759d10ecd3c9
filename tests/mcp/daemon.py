"""A daemon under test: `opcode serve` on a free loopback port with its own
HOME and database."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, binary, home, port, env=None, args=(), cwd=None, log=None, db=None):
        self.binary, self.home, self.port = binary, home, port
        self.db = db or f"{home}/opcode.db"
        self.env, self.args, self.cwd = env or {}, list(args), cwd
        # A daemon that logs much writes to a file: a pipe nobody reads fills up.
        self.log = log
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        env = dict(os.environ, HOME=self.home, **self.env)
        self.process = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db,
             *self.args], env=env, stderr=open(self.log, "a") if self.log else subprocess.PIPE, text=True,
            cwd=self.cwd)
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/livez", timeout=1)
                return
            except urllib.error.HTTPError:
                return  # It answers (a token is required).
            except OSError:
                if time.time() > deadline or self.process.poll() is not None:
                    said = open(self.log).read() if self.log else self.process.stderr.read()
                    raise AssertionError("the daemon did not start: " + said)
                time.sleep(0.05)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=15)
