"""A raw JSON-RPC client of /mcp (Streamable HTTP), for what the SDKs do
not speak or hide: byte sizes on the wire, the tasks extension, and the
session's notification stream."""

import json
import queue
import threading
import urllib.request

# What names a request in its `Mcp-Name` header (SEP-2243; SEP-2663 for tasks).
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
            "resources/subscribe": "uri", "resources/unsubscribe": "uri",
            "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


class Session:
    """A Streamable HTTP client at `revision` declaring `capabilities`,
    answering each call with its raw body (a session of its own before
    2026-07-28; at 2026-07-28 every request carries its `_meta`)."""

    def __init__(self, url, revision="2025-11-25", capabilities=None):
        self.url, self.revision, self.session, self.next_id = url, revision, None, 0
        self.capabilities = capabilities or {}

    def headers(self, message=None):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": self.revision}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if message and self.revision >= "2026-07-28":
            # SEP-2243: the method and the tool's name ride in headers too.
            method, params = message["method"], message.get("params", {})
            headers["Mcp-Method"] = method
            name = NAMED_BY.get(method)
            if name:
                headers["Mcp-Name"] = params[name]
        return headers

    def post(self, message):
        request = urllib.request.Request(self.url, json.dumps(message).encode(), self.headers(message))
        with urllib.request.urlopen(request, timeout=30) as response:
            self.session = response.headers.get("Mcp-Session-Id", self.session)
            body = response.read().decode()
        if not body:
            return None, 0
        if body.lstrip().startswith("{"):
            return json.loads(body), len(body.encode())
        # An SSE body: each event's `data:` is a JSON-RPC message; the
        # answer is the one with the request's id (notifications may come first).
        events = [line[5:].strip() for line in body.splitlines()
                  if line.startswith("data:") and line[5:].strip()]
        for payload in events:
            reply = json.loads(payload)
            if "id" in reply and reply.get("id") == message.get("id"):
                return reply, len(payload.encode())
        raise AssertionError(f"no answer to {message.get('method')} in {body[:300]}")

    def request(self, method, params):
        """The whole JSON-RPC reply (`result` or `error`) and its size."""
        if self.revision >= "2026-07-28":
            params = dict(params, _meta={
                "io.modelcontextprotocol/protocolVersion": self.revision,
                "io.modelcontextprotocol/clientCapabilities": self.capabilities,
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}})
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    def call(self, method, params):
        """The result of `method` and the reply's size; an error raises."""
        reply, size = self.request(method, params)
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return reply["result"], size

    def open(self):
        if self.revision >= "2026-07-28":
            return
        self.call("initialize", {"protocolVersion": self.revision, "capabilities": self.capabilities,
                                 "clientInfo": {"name": "raw", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def listen(self):
        """The session's notifications (its GET stream), as a queue of
        JSON-RPC messages filled by a background thread."""
        messages = queue.Queue()
        headers = self.headers()
        headers["Accept"] = "text/event-stream"
        response = urllib.request.urlopen(urllib.request.Request(self.url, headers=headers), timeout=60)

        def read():
            with response:
                for line in response:
                    line = line.decode().strip()
                    if line.startswith("data:") and line[5:].strip():
                        messages.put(json.loads(line[5:]))

        threading.Thread(target=read, daemon=True).start()
        return messages
