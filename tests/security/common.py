"""What the attack tests share: a daemon started as an operator would (its
own HOME holding settings, a vault key file and the database, started from
that HOME, with its token and passphrase in the environment), and a bare
stateless MCP tool call with the bearer token."""

import json
import os
import secrets
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mcp"))

from daemon import Daemon, free_port  # noqa: E402

TOKEN = "tok-" + secrets.token_hex(16)
VAULT_KEY = "vault-" + secrets.token_hex(16)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


class Expectations:
    """Checks that go on after a failure, so that one run shows every
    protection that does not hold; each section prints `ok` when it held."""

    def __init__(self):
        self.failed, self.current = [], []

    def that(self, condition, what):
        if not condition:
            self.current.append(what)

    def section(self, name):
        if self.current:
            self.failed.extend(f"{name}: {what}" for what in self.current)
            print(f"FAILED - {name}")
        else:
            print(f"ok - {name}")
        self.current = []

    def done(self):
        if self.failed:
            raise AssertionError("\n".join(self.failed))


def operator_daemon(binary, home, settings=None, env=None, args=(), log=None):
    """`opcode serve` started from `home`, as the tester did: settings
    (with the token) and the vault key in `home/.opcode`, the token and the
    passphrase in the environment too."""
    os.makedirs(f"{home}/.opcode", exist_ok=True)
    with open(f"{home}/.opcode/vault.key", "w") as f:
        f.write(VAULT_KEY + "\n")
    config = {"token": TOKEN, "vault_key_file": f"{home}/.opcode/vault.key", **(settings or {})}
    with open(f"{home}/.opcode/settings.json", "w") as f:
        json.dump(config, f)
    environment = {"OPCODE_TOKEN": TOKEN, "OPCODE_VAULT_KEY": VAULT_KEY, **(env or {})}
    daemon = Daemon(os.path.abspath(binary), home, free_port(), env=environment, args=["--token", TOKEN, *args],
                    cwd=home, log=log)
    daemon.start()
    return daemon


def call(daemon, tool, arguments, token=TOKEN):
    """One stateless (2026-07-28) `tools/call`; the tool's structured result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    request = urllib.request.Request(f"{daemon.url}/mcp", data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool,
        "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    check("result" in answer, f"{tool}: {answer}")
    return answer["result"].get("structuredContent") or json.loads(answer["result"]["content"][0]["text"])


def read(daemon, uri, token=TOKEN):
    """The text of resource `uri` (a stateless `resources/read`)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {
        "uri": uri,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    request = urllib.request.Request(f"{daemon.url}/mcp", data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": uri,
        "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    check("result" in answer, f"resources/read {uri}: {answer}")
    return answer["result"]["contents"][0]["text"]


def whole(daemon, value, token=TOKEN):
    """`value`, read from its resource when a result replaced it by
    `{bytes, uri}` (over the inline limit)."""
    if not (isinstance(value, dict) and set(value) == {"bytes", "uri"}):
        return value
    return json.loads(read(daemon, value["uri"], token))


def get(daemon, path, token=TOKEN, headers=None):
    """A GET with the bearer token; (status, body text)."""
    request = urllib.request.Request(f"{daemon.url}{path}",
                                     headers={"Authorization": f"Bearer {token}", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
