#!/usr/bin/env python3
"""Writes a workflow of 300 cheap steps to stdout: 150 chained
`crypto.hash` steps, each checked by a CEL `expr.eval`; what `opcode run`
spends on it is the engine's own work (compile, schedule, checkpoint,
interpolate, evaluate), for comparing two builds of one binary.

    python3 benches/startup/cheap_chain.py > /tmp/chain.json
"""
import json

steps = []
for i in range(150):
    data = "x0" if i == 0 else f"${{{{steps.s{i - 1}.output.hash}}}}"
    hashed = {"id": f"s{i}", "action": "crypto.hash", "params": {"data": data, "algorithm": "sha256"}}
    if i:
        hashed["depends_on"] = [f"s{i - 1}"]
    steps.append(hashed)
    steps.append({"id": f"e{i}", "action": "expr.eval", "depends_on": [f"s{i}"],
                  "params": {"expression": f"size(steps.s{i}.hash) == 64", "language": "cel"}})
print(json.dumps({"steps": steps}))
