"""The sandbox's covers hold wherever the daemon lives (spec/security.md,
"A step and the daemon's own files"): its HOME made in /tmp, in /var/lib
and in /home, and each time the step's workspace is that HOME itself
(`isolation.workspace`), so the bind that gives the step its workspace
brings the daemon's files back unless they are covered after it. A
`shell.exec` step then reads every one of them; none may show a byte of
the database, the settings, the vault key or the token. With tenants, a
step of acme granted the whole HOME (under /tmp) as its workspace sees
nothing of globex's folder or runs, nor of the operator's database.

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


def tenants_read_nothing(binary, expect):
    home = tempfile.mkdtemp(prefix="opcode-covers-", dir="/tmp")
    tokens = {name: f"{name}-covers-token-0123456789" for name in ("acme", "globex")}
    try:
        os.chmod(home, 0o755)
        settings = {"tenants": {
            "acme": {"tokens": [tokens["acme"]], "grants": [{"template": "wide", "workspaces": [home]}]},
            "globex": {"tokens": [tokens["globex"]]}}}
        daemon = operator_daemon(binary, home, settings=settings)
        try:
            # Globex's run writes a note in its workspace and waits, so the
            # workspace is there while acme looks.
            note = [{"id": "note", "action": "fs.write", "params": {"path": "globex-note.txt", "content": "GLOBEXDATA"}},
                    {"id": "hold", "type": "wait", "depends_on": ["note"], "config": {"signal": "never"}}]
            call(daemon, "opcode.define", {"name": "note", "definition": {"steps": note}}, token=tokens["globex"])
            held = call(daemon, "opcode.run", {"template_name": "note"}, token=tokens["globex"])
            expect.that(held.get("status") == "suspended", f"globex's run: {held}")
            look = {"id": "look", "action": "shell.exec", "isolation": {"workspace": home}, "params": {
                "command": "/bin/sh", "args": ["-c", "ls -aR . 2>&1 | head -c 20000; "
                                                     "for f in opcode.db opcode.db-wal; do printf '%s:' $f; "
                                                     "head -c 16 $f 2>&1 | od -An -c | tr -d ' \\n'; echo; done; "
                                                     "cat $(find . -name 'globex-note.txt') 2>&1"]}}
            defined = call(daemon, "opcode.define", {"name": "wide", "definition": {"steps": [look]}},
                           token=tokens["acme"])
            expect.that("version" in defined, f"acme's wide template: {defined}")
            run = call(daemon, "opcode.run", {"template_name": "wide", "include": ["outputs"]}, token=tokens["acme"])
            output = whole(daemon, (run.get("steps") or {}).get("look", {}).get("output") or {}, token=tokens["acme"])
            shown = json.dumps(output)
            expect.that(output.get("isolated") is True, f"tenants: not sandboxed: {json.dumps(run)[:800]}")
            for secret, what in [("GLOBEXDATA", "globex's workspace"), ("S   Q   L   i   t   e", "a database"),
                                 (TOKEN, "the operator's token"), (tokens["globex"], "globex's token")]:
                expect.that(secret not in shown, f"acme read {what}: {shown[:1500]}")
            expect.that("globex-note.txt" not in shown, f"acme lists globex's workspace: {shown[:1500]}")
            lines = output.get("stdout_raw", "").splitlines()
            for name in ("opcode.db", "opcode.db-wal"):
                expect.that(f"{name}:" in lines, f"the operator's {name} is not covered for acme: {lines[-8:]}")
        finally:
            daemon.terminate()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    expect.section("acme, granted the daemon's whole HOME under /tmp, sees nothing of globex nor any database")


def main(binary):
    expect = Expectations()
    os.makedirs("/var/lib", exist_ok=True)
    for base in ("/tmp", "/var/lib", "/home"):
        reads_nothing(binary, base, expect)
    tenants_read_nothing(binary, expect)
    expect.done()


if __name__ == "__main__":
    main(sys.argv[1])
