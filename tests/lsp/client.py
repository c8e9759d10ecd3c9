"""A small LSP client over stdio: JSON-RPC framing, requests, and the
notifications the server publishes."""

import json
import os
import queue
import subprocess
import threading
import time


class Client:
    def __init__(self, command):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.responses = {}
        self.notifications = queue.Queue()
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        stream = self.process.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.decode().strip()
                if not line:
                    break
                key, value = line.split(":", 1)
                headers[key.lower()] = value.strip()
            body = json.loads(stream.read(int(headers["content-length"])))
            if "id" in body and "method" not in body:
                with self.lock:
                    self.responses[body["id"]] = body
                    self.lock.notify_all()
            elif "method" in body and "id" in body:
                # A request from the server (such as workspace/configuration): answer null.
                self._send({"jsonrpc": "2.0", "id": body["id"], "result": None})
            else:
                self.notifications.put((time.monotonic(), body))

    def _send(self, message):
        data = json.dumps(message).encode()
        self.process.stdin.write(f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        self.process.stdin.flush()

    def request(self, method, params, timeout=10):
        self.next_id += 1
        ident = self.next_id
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self.lock:
            while ident not in self.responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no answer to {method}")
                self.lock.wait(remaining)
            response = self.responses.pop(ident)
        if "error" in response:
            raise AssertionError(f"{method}: {response['error']}")
        return response["result"]

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri, timeout=10):
        """The next diagnostics published for `uri`: (arrival time, list)."""
        deadline = time.monotonic() + timeout
        while True:
            at, message = self.notifications.get(timeout=max(0.01, deadline - time.monotonic()))
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                return at, message["params"]["diagnostics"]

    def start(self, root):
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": f"file://{root}",
                                             "capabilities": {}})
        self.notify("initialized", {})
        return result

    def open(self, uri, text, language="json"):
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language,
                                                              "version": 1, "text": text}})

    def change(self, uri, text, version):
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def stop(self):
        self.request("shutdown", None)
        self.notify("exit", None)
        self.process.wait(timeout=10)
