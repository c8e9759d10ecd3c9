"""A scripted coding agent for the delegated-agent tests: a real program,
speaking the plain protocol (a JSON task on stdin, JSON lines out, control
lines in) or OpenCode's `run --format json` stream, that does what the
`=== TASK ===` part of its prompt says, one line a model step:

    say TEXT          its words
    read PATH         reads a file (a `read` tool call)
    write PATH TEXT   writes a file (a `write` tool call; a failure is data)
    run COMMAND...    runs a shell command (a `bash` tool call, exit code)
    ask WHAT          asks permission and waits for the answer (plain)
    plan A, B         a plan update
    loop              steps until told to wrap up (or forever: `loop stubborn`)
    recall WORD       says whether WORD is in the session history it was given
    sleep SECONDS     waits
    env NAME          says the variable's value
    option NAME       says the value its command line gives after NAME
    crash CODE        exits with CODE without a report

After the script it reports: files it wrote, commands it ran, its summary.

Usage: scripted_agent.py plain | scripted_agent.py opencode [OPTIONS...] PROMPT
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

PROTOCOL = sys.argv[1]
SESSION = "ses_scripted"
control = queue.Queue()


def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def read_control():
    for line in sys.stdin:
        try:
            control.put(json.loads(line))
        except ValueError:
            pass


if PROTOCOL == "plain":
    task = json.loads(sys.stdin.readline())
    prompt = task["prompt"]
    threading.Thread(target=read_control, daemon=True).start()
else:
    task = {}
    prompt = sys.argv[-1]

script = prompt.split("=== TASK ===", 1)[-1].strip().splitlines()
wrote, ran, said = [], [], []
wrap_up = threading.Event()
step = 0


def drain():
    answers = {}
    while True:
        try:
            message = control.get_nowait()
        except queue.Empty:
            return answers
        if message.get("type") == "wrap_up":
            wrap_up.set()
        elif message.get("type") == "permission_response":
            answers[message["id"]] = message["answer"]


def text(words):
    said.append(words)
    if PROTOCOL == "plain":
        emit({"type": "text", "text": words})
    else:
        emit({"type": "text", "timestamp": int(time.time() * 1000), "sessionID": SESSION,
              "part": {"type": "text", "text": words}})


def tool(name, call_id, tool_input, output, exit_code=None, error=False):
    if PROTOCOL == "plain":
        emit({"type": "tool_start", "id": call_id, "tool": name, "input": tool_input})
        emit({"type": "tool_finish", "id": call_id, "tool": name, "output": output,
              "exit_code": exit_code, "is_error": error})
    else:
        state = {"status": "error" if error else "completed", "input": tool_input, "output": output,
                 "metadata": {} if exit_code is None else {"exit": exit_code}}
        emit({"type": "tool_use", "timestamp": int(time.time() * 1000), "sessionID": SESSION,
              "part": {"type": "tool", "tool": name, "callID": call_id, "state": state}})


def begin_step():
    if PROTOCOL == "opencode":
        emit({"type": "step_start", "sessionID": SESSION, "part": {"type": "step-start"}})


def end_step():
    global step
    step += 1
    tokens = {"input": 100, "output": 10}
    if PROTOCOL == "plain":
        emit({"type": "step", "tokens": tokens, "cost": 0.001})
    else:
        emit({"type": "step_finish", "sessionID": SESSION,
              "part": {"type": "step-finish", "reason": "tool-calls", "tokens": tokens, "cost": 0.001}})
    drain()


def ask(what):
    emit({"type": "permission_request", "id": f"perm_{step}", "action": what, "detail": {"pattern": what}})
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            message = control.get(timeout=0.1)
        except queue.Empty:
            continue
        if message.get("type") == "permission_response" and message.get("id") == f"perm_{step}":
            return message["answer"]
        if message.get("type") == "wrap_up":
            wrap_up.set()
    return "no answer"


for number, line in enumerate(script):
    words = line.strip().split(" ", 2)
    if not words or not words[0]:
        continue
    verb, rest = words[0], line.strip()[len(words[0]):].strip()
    begin_step()
    if verb == "say":
        text(rest)
    elif verb == "read":
        try:
            with open(rest) as f:
                tool("read", f"c{number}", {"filePath": rest}, f.read())
        except OSError as e:
            tool("read", f"c{number}", {"filePath": rest}, str(e), error=True)
    elif verb == "write":
        path, _, content = rest.partition(" ")
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                f.write(content + "\n")
            wrote.append(path)
            tool("write", f"c{number}", {"filePath": path}, "written")
        except OSError as e:
            tool("write", f"c{number}", {"filePath": path}, f"error: {e}", error=True)
            text(f"could not write {path}: {e.strerror}")
    elif verb == "run":
        done = subprocess.run(["/bin/sh", "-c", rest], capture_output=True, text=True)
        ran.append(rest)
        tool("bash", f"c{number}", {"command": rest}, done.stdout + done.stderr, exit_code=done.returncode)
    elif verb == "ask":
        answer = ask(rest)
        text(f"permission to {rest}: {answer}")
    elif verb == "plan":
        emit({"type": "plan", "todos": [t.strip() for t in rest.split(",")]})
    elif verb == "loop":
        while rest == "stubborn" or not wrap_up.is_set():
            time.sleep(0.1)
            end_step()
            begin_step()
        text("wrapping up as told")
    elif verb == "recall":
        history = prompt.split("=== TASK ===", 1)[0].split("=== BUDGET ===", 1)[-1]
        text(f"{'recalled' if rest in history else 'forgot'} {rest}")
    elif verb == "sleep":
        time.sleep(float(rest))
    elif verb == "env":
        text(f"{rest}={os.environ.get(rest, '')}")
    elif verb == "option":
        given = sys.argv[sys.argv.index(rest) + 1] if rest in sys.argv[:-1] else ""
        text(f"{rest}={given}")
    elif verb == "crash":
        sys.stderr.write("scripted agent: crashing as told\n")
        sys.exit(int(rest or "3"))
    end_step()

summary = said[-1] if said else "nothing to say"
if PROTOCOL == "plain":
    emit({"type": "report", "summary": summary, "files_changed": wrote})
else:
    begin_step()
    text(summary)
    emit({"type": "step_finish", "sessionID": SESSION,
          "part": {"type": "step-finish", "reason": "stop", "tokens": {"input": 50, "output": 5}, "cost": 0.0005}})
