"""Steps naming a published agent (spec/registry.md, "Steps naming a
release"), through the daemon that delegation.py starts: the release's
entry, model, skills and budgets reach the agent; `opcode.define` pins a
bare name to the newest release, so a later publish changes nothing until
the workflow is defined again; unknown names and a release of another role
are refused when the workflow is defined, with a fix.
"""

import json
import os
import subprocess

from common import call  # noqa: E402

TEMPLATES = ["reg", "reg-exact"]


def publish(binary, home, version, model, skill):
    """Publishes db-analyzer `version` into the daemon's database."""
    folder = f"{home}/agents-{version}"
    os.makedirs(folder, exist_ok=True)
    definition = {"name": "db-analyzer", "version": version, "role": "scout", "runs_on": "oc",
                  "model": model, "skills": [{"name": "db", "content": skill}],
                  "budgets": {"max_steps": 12}, "permissions": "deny"}
    path = f"{folder}/db-analyzer.agent.json"
    with open(path, "w") as f:
        json.dump(definition, f)
    done = subprocess.run([binary, "agent", "publish", path, "--db", f"{home}/opcode.db"],
                          capture_output=True, text=True, env=dict(os.environ, HOME=home))
    return done.returncode, done.stdout + done.stderr


def scout(repo, agent):
    return {"id": "look", "action": "agent.scout", "params": {
        "agent": agent, "workspace": repo,
        "prompt": "run cat $HOME/.opencode/skills/db/SKILL.md\noption --model"}}


def define_and_run(daemon, name, agent, repo):
    defined = call(daemon, "opcode.define", {"name": name, "definition": {"steps": [scout(repo, agent)]}})
    return defined, run_again(daemon, name)


def run_again(daemon, name):
    ran = call(daemon, "opcode.run", {"template_name": name, "include": ["outputs"]})
    return ran, (ran.get("steps", {}).get("look", {}).get("output") or {})


def check(expect, binary, home, daemon, repo):
    code, said = publish(binary, home, "1.0.0", "registry/model-1", "SKILL-TEXT-ONE")
    expect.that(code == 0, f"publish 1.0.0: {said}")
    _, (ran, seen) = define_and_run(daemon, "reg", "db-analyzer", repo)
    transcript = open(seen["transcript"]["path"]).read() if seen.get("transcript") else ""
    expect.that(ran.get("status") == "completed", f"the run: {json.dumps(ran)[:2000]}")
    expect.that(seen.get("release") == "db-analyzer@1.0.0" and seen.get("agent") == "oc", f"which release: {seen}")
    expect.that(seen.get("summary") == "--model=registry/model-1", f"the release's model: {seen.get('summary')}")
    expect.that(seen.get("max_steps") == 12, f"the release's budget: {seen.get('max_steps')}")
    expect.that("SKILL-TEXT-ONE" in transcript, f"the release's skill in the agent's home: {transcript[-1500:]}")
    expect.section("a step naming a published agent runs it: its entry, model, skill and budget")

    code, said = publish(binary, home, "1.1.0", "registry/model-2", "SKILL-TEXT-TWO")
    expect.that(code == 0, f"publish 1.1.0: {said}")
    _, seen = run_again(daemon, "reg")
    expect.that(seen.get("release") == "db-analyzer@1.0.0" and seen.get("summary") == "--model=registry/model-1",
                f"a new release changed a defined workflow: {seen}")
    _, (_, seen) = define_and_run(daemon, "reg", "db-analyzer", repo)
    expect.that(seen.get("release") == "db-analyzer@1.1.0" and seen.get("summary") == "--model=registry/model-2",
                f"defined again, the newest: {seen}")
    _, (_, seen) = define_and_run(daemon, "reg-exact", "db-analyzer@1.0.0", repo)
    expect.that(seen.get("release") == "db-analyzer@1.0.0", f"an exact release: {seen}")
    expect.section("a bare name is pinned when the workflow is defined: a later publish waits for a new define; "
                   "name@version runs that release")

    refused = call(daemon, "opcode.define", {"name": "reg-typo", "definition": {"steps": [
        scout(repo, "db-analyser")]}})
    found = [d for d in (refused.get("error", {}).get("details") or {}).get("diagnostics", [])
             if d.get("code") == "E0068"]
    fix = (found or [{}])[0].get("fix") or {}
    expect.that(found and fix.get("patch") == [{"op": "replace", "path": "/definition/steps/0/params/agent",
                                                "value": "db-analyzer"}], f"an unknown agent: {refused}")
    refused = call(daemon, "opcode.define", {"name": "reg-version", "definition": {"steps": [
        scout(repo, "db-analyzer@1.1.1")]}})
    expect.that("E0068" in json.dumps(refused) and "db-analyzer@1.1.0" in json.dumps(refused),
                f"an unknown version: {refused}")
    worker = {**scout(repo, "db-analyzer"), "action": "agent.worker"}
    refused = call(daemon, "opcode.define", {"name": "reg-role", "definition": {"steps": [worker]}})
    expect.that("E0070" in json.dumps(refused) and "agent.scout" in json.dumps(refused),
                f"a scout run as a worker: {refused}")
    expect.section("an unknown agent or version (E0068, the closest as a fix) and a release of another role "
                   "(E0070) are refused when the workflow is defined")
