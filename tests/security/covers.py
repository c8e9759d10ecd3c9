"""The sandbox's covers hold wherever the daemon lives (spec/security.md,
"A step and the daemon's own files"): its HOME made in /tmp, in /var/lib
and in /home, and each time the step's workspace is that HOME itself
(`isolation.workspace`), so the bind that gives the step its workspace
brings the daemon's files back unless they are covered after it. A
`shell.exec` step then reads every one of them; none may show a byte of
the database, the settings, the vault key or the token.

Usage: python covers.py PATH_TO_OPCODE
"""

import json
import os
import shutil
import sys
import tempfile

from common import TOKEN, VAULT_KEY, Expectations, call, operator_daemon, whole

READ = """
for f in opcode.db opcode.db-wal .opcode/settings.json .opcode/vault.key; do
  printf '%s:' "$f"; head -c 64 "$f" 2>&1 | od -An -c | tr -d ' \\n' | head -c 200; echo
done
ls -a .opcode 2>&1 | tr '\\n' ' '
"""


def reads_nothing(binary, base, expect):
    home = tempfile.mkdtemp(prefix="opcode-covers-", dir=base)
    try:
        os.chmod(home, 0o755)
        daemon = operator_daemon(binary, home, settings={"isolation": {"workspace": home}})
        try:
            step = {"id": "read", "action": "shell.exec", "params": {"command": "/bin/sh", "args": ["-c", READ]}}
            defined = call(daemon, "opcode.define", {"name": "read", "definition": {"steps": [step]}})
            expect.that("version" in defined, f"{base}: define: {defined}")
            run = call(daemon, "opcode.run", {"template_name": "read", "include": ["outputs"]})
            output = whole(daemon, run.get("steps", {}).get("read", {}).get("output") or {})
            expect.that(output.get("isolated") is True, f"{base}: the step was not sandboxed: {json.dumps(run)[:800]}")
            shown = json.dumps(output)
            for secret, what in [("SQLite", "the database"), (TOKEN, "the token"), (VAULT_KEY, "the vault key"),
                                 ("vault_key_file", "the settings")]:
                expect.that(secret not in shown.replace("\\", "").replace(" ", ""),
                            f"{base}: the step read {what}: {shown[:1500]}")
        finally:
            daemon.terminate()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    expect.section(f"a daemon whose HOME is in {base}, granted to a step as its workspace: its files stay covered")


def main(binary):
    expect = Expectations()
    os.makedirs("/var/lib", exist_ok=True)
    for base in ("/tmp", "/var/lib", "/home"):
        reads_nothing(binary, base, expect)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
