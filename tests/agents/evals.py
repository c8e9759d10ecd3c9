"""Agent eval suites (spec/agent-evals.md) through the real binary: `opcode
agent test` runs each case as a one-step run in the real sandbox with
tests/agents/scripted_agent.py as the agent, checks its post-conditions,
writes JUnit; `publish` refuses a failing suite unless forced; the last
result is kept with the release and shown. Each section prints `ok` when
it held.

Usage: python evals.py PATH_TO_OPCODE
"""

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))

from common import Expectations  # noqa: E402

SCHEMA = "CREATE TABLE orders (id int);"


def agent_files(home, name, role, skill, version="1.0.0"):
    with open(f"{home}/{name}.agent.json", "w") as f:
        json.dump({"name": name, "version": version, "role": role, "runs_on": "oc", "model": "m/one",
                   "skills": [{"name": "db", "content": skill}], "budgets": {"max_steps": 16}}, f)


def suite(home, name, cases):
    with open(f"{home}/{name}.eval.json", "w") as f:
        json.dump({"agent": name, "cases": cases}, f)


REPORT = {"name": "writes the report",
          "prompt": "run cat $HOME/.opencode/skills/db/SKILL.md\nread schema.sql\n"
                    "write report.md orders need an index\nrun git log --oneline\nsay added an index",
          "workspace": {"files": {"schema.sql": SCHEMA, "sub/dir/notes.txt": "n"}, "git": True},
          "expect": {"status": "completed", "exit_code": 0, "output_contains": ["index"],
                     "tools_called": ["read", "write"], "tools_not_called": ["webfetch"],
                     "commands_ran": ["git log"], "files_exist": ["report.md", "sub/dir/notes.txt"],
                     "files_absent": ["schema.sql.bak"], "file_contains": {"report.md": "index"},
                     "files_changed": [{"path": "report.md", "change": "added"}]}}
DROPS = {"name": "never drops the table", "prompt": "write schema.sql DROP TABLE orders\nsay dropped it",
         "workspace": {"files": {"schema.sql": SCHEMA}},
         "expect": {"output_lacks": ["dropped"], "file_contains": {"schema.sql": "CREATE"}}}


def main(binary):
    expect = Expectations()
    base = f"/var/tmp/opcode-evals-{secrets.token_hex(4)}"
    os.makedirs(base)
    os.chmod(base, 0o755)
    shutil.copy(os.path.join(os.path.dirname(__file__), "scripted_agent.py"), f"{base}/agent.py")
    os.chmod(f"{base}/agent.py", 0o755)
    try:
        with tempfile.TemporaryDirectory() as home:
            os.makedirs(f"{home}/.opcode")
            with open(f"{home}/.opcode/settings.json", "w") as f:
                json.dump({"agents": {"oc": {"protocol": "opencode", "default": True, "command": [
                    "python3", f"{base}/agent.py", "opencode", ["--model", "{model}"], "{prompt}"]}},
                    "isolation": {"workspace_root": f"{base}/workspaces"}}, f)

            def opcode(*args):
                done = subprocess.run([binary, "agent", *args, "--db", f"{home}/o.db"], capture_output=True,
                                      text=True, cwd=home, env=dict(os.environ, HOME=home), timeout=300)
                return done.returncode, done.stdout + done.stderr

            agent_files(home, "db-fixer", "worker", "SKILL-ONE")
            suite(home, "db-fixer", [REPORT, DROPS])
            code, said = opcode("test", "db-fixer.agent.json", "--junit", f"{home}/junit.xml", "--jobs", "2")
            expect.that(code == 1, f"a failing suite exits 1: {code} {said}")
            expect.that("ok - writes the report" in said and "FAILED - never drops the table" in said
                        and "output_lacks" in said and "schema.sql` lacks" in said, f"what it said: {said}")
            junit = ElementTree.parse(f"{home}/junit.xml").getroot().find("testsuite")
            expect.that(junit.get("tests") == "2" and junit.get("failures") == "1"
                        and junit.get("name") == "db-fixer@1.0.0", f"JUnit: {ElementTree.tostring(junit)[:500]}")
            expect.that(not os.listdir(f"{base}/agent-evals"), f"case workspaces left: {os.listdir(f'{base}/agent-evals')}")
            expect.section("agent test: each case a sandboxed run; post-conditions on the result and the workspace; "
                           "JUnit; workspaces removed")

            code, said = opcode("publish", "db-fixer.agent.json")
            listed = opcode("list", "--json")[1]
            expect.that(code == 1 and "is not published: 1 of 2 cases" in said and "db-fixer" not in listed,
                        f"a failing suite published: {code} {said} {listed}")
            code, said = opcode("publish", "db-fixer.agent.json", "--force")
            shown = json.loads(opcode("show", "db-fixer")[1])
            expect.that(code == 0 and "published db-fixer@1.0.0" in said, f"--force: {code} {said}")
            expect.that(shown["last_eval"]["failed"] == 1 and shown["last_eval"]["passed"] == 1,
                        f"the forced release's eval: {shown.get('last_eval')}")
            suite(home, "db-fixer", [REPORT, {**DROPS, "expect": {"status": "completed",
                                                                  "files_changed": [{"path": "schema.sql",
                                                                                     "change": "modified"}]}}])
            code, said = opcode("test", "db-fixer.agent.json", "--json")
            shown = json.loads(opcode("show", "db-fixer")[1])
            expect.that(code == 0 and json.loads(said.splitlines()[0])["cases"][1]["passed"],
                        f"the suite passing: {code} {said}")
            expect.that(shown["last_eval"]["failed"] == 0 and shown["last_eval"]["passed"] == 2,
                        f"a passing run kept with the published release: {shown.get('last_eval')}")
            expect.section("publish refuses a failing suite, --force publishes it; the last result is kept with "
                           "the release and shown")

            agent_files(home, "db-fixer", "worker", "SKILL-TWO", version="1.1.0")
            transcript_says = {**REPORT, "prompt": "run cat $HOME/.opencode/skills/db/SKILL.md > skill.txt",
                               "expect": {"file_contains": {"skill.txt": "SKILL-TWO"}}}
            suite(home, "db-fixer", [transcript_says])
            code, said = opcode("publish", "db-fixer.agent.json")
            diff = opcode("diff", "db-fixer@1.0.0", "db-fixer@1.1.0")[1]
            expect.that(code == 0 and "published db-fixer@1.1.0" in said, f"1.1.0: {code} {said}")
            expect.that("-SKILL-ONE" in diff and "+SKILL-TWO" in diff, f"diff: {diff}")
            expect.section("a changed skill is what the case's agent reads; changed, tested, diffed, published again")

            agent_files(home, "db-scout", "scout", "look only")
            suite(home, "db-scout", [{"name": "cannot write", "prompt": "write schema.sql gone\nsay tried",
                                      "workspace": {"files": {"schema.sql": SCHEMA}},
                                      "expect": {"files_changed": [], "file_contains": {"schema.sql": "CREATE"}}}])
            code, said = opcode("test", "db-scout.agent.json")
            expect.that(code == 0 and "ok - cannot write" in said, f"a scout wrote in its eval: {code} {said}")
            expect.section("a case runs in its role's sandbox: a scout cannot write its workspace")

            suite(home, "db-scout", [{"name": "escape", "prompt": "say x",
                                      "workspace": {"files": {"../../etc/cron.d/x": "boom"}}}])
            code, said = opcode("test", "db-scout.agent.json")
            expect.that(code == 2 and "E0071" in said and not os.path.exists("/etc/cron.d/x"), f"escape: {code} {said}")
            suite(home, "db-fixer", [{"name": "x", "prompt": "say x"}])
            code, said = opcode("test", "db-scout.agent.json", "--suite", "db-fixer.eval.json")
            expect.that(code != 0 and "tests agent `db-fixer`, not `db-scout`" in said, f"another agent's suite: {said}")
            expect.section("a suite's bad paths and another agent's suite are refused before anything runs (E0071)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    expect.done()


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
