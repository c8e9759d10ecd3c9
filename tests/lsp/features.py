"""`opcodec lsp` driven as an editor would: diagnostics on open and change
(JSON named anything, and .opc), fixes as code actions, hover, completion,
definition, references, symbols, formatting, UTF-16 positions.

Usage: python features.py PATH_TO_OPCODEC
"""

import json
import os
import sys
import tempfile
import time

from client import Client


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def position(text, needle, offset=0, nth=0):
    """The LSP position (UTF-16 columns) of `needle` (+offset) in `text`."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += offset
    line = text.count("\n", 0, at)
    start = text.rfind("\n", 0, at) + 1
    column = len(text[start:at].encode("utf-16-le")) // 2
    return {"line": line, "character": column}


def apply(text, edits):
    lines = text.split("\n")
    def offset(p):
        prefix = "\n".join(lines[:p["line"]]) + ("\n" if p["line"] else "")
        col_text = lines[p["line"]] if p["line"] < len(lines) else ""
        units, i = 0, 0
        while i < len(col_text) and units < p["character"]:
            units += len(col_text[i].encode("utf-16-le")) // 2
            i += 1
        return len(prefix) + i
    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        a, b = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:a] + edit["newText"] + text[b:]
    return text


JSON_FLOW = """{
  "name": "demo",
  "input_schema": {"type": "object", "properties": {"url": {"type": "string", "default": "http://x"}}},
  "definition": {
    "steps": [
      {"id": "make", "action": "crypto.uuid"},
      {"id": "fetch", "action": "http.gett", "depends_on": ["make"],
       "params": {"url": "${{inputs.url}}", "headers": {"X-Id": "${{steps.make.output.uuid}}"}}},
      {"id": "log", "action": "workflow.log", "depends_on": ["fetch"], "condition": "steps.make.uuid != ''",
       "params": {"message": "done"}}
    ]
  }
}
"""

OPC_FLOW = """# caf\u00e9 \U0001F600 comments are fine
definition {
  step make crypto.uuid
  step say   workflow.log after make {
    params { message: "\u00e9\U0001F600 ${{steps.make.output.uuid}}" }
  }
}
"""


def main(binary):
    client = Client([binary, "lsp"])
    caps = client.start("/tmp")["capabilities"]
    for capability in ["hoverProvider", "completionProvider", "definitionProvider", "referencesProvider",
                       "documentSymbolProvider", "documentFormattingProvider", "codeActionProvider"]:
        check(capability in caps, f"missing {capability}")
    check(caps.get("positionEncoding") == "utf-16", caps)

    uri = "file:///tmp/anything-named.json"
    client.open(uri, JSON_FLOW)
    _, diags = client.diagnostics(uri)
    check([d["code"] for d in diags] == ["E0040"], f"diagnostics: {diags}")
    check(diags[0]["range"]["start"] == position(JSON_FLOW, '"http.gett"'), diags[0]["range"])
    print("ok - a JSON workflow with any name gets coded diagnostics at the right place on open")

    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diags[0]["range"],
                                                        "context": {"diagnostics": diags}})
    check(actions and "http.get" in actions[0]["title"], f"code actions: {actions}")
    fixed = apply(JSON_FLOW, actions[0]["edit"]["changes"][uri])
    check('"http.get"' in fixed and '"http.gett"' not in fixed, fixed)
    client.change(uri, fixed, 2)
    _, diags = client.diagnostics(uri)
    check(diags == [], f"after the fix: {diags}")
    print("ok - a fix comes as a code action; after the change the diagnostics clear")

    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                   "position": position(fixed, '"http.get"', 3)})
    check("http.get(" in hover["contents"]["value"] and "url" in hover["contents"]["value"], hover)
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                   "position": position(fixed, "steps.make.output", 7)})
    check("output of step `make`" in hover["contents"]["value"], hover)
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                   "position": position(fixed, "inputs.url", 8)})
    check("input `url`" in hover["contents"]["value"] and "string" in hover["contents"]["value"], hover)
    print("ok - hover documents actions and says what a reference resolves to")

    def complete(text, needle, offset, version):
        client.change(uri, text, version)
        client.diagnostics(uri)
        items = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                            "position": position(text, needle, offset)})
        return {i["label"] for i in (items or [])}

    typing_action = fixed.replace('"action": "crypto.uuid"', '"action": "ht', 1)
    check("http.get" in complete(typing_action, '"action": "ht', 13, 3), "action names")
    in_params = fixed.replace('"message": "done"', '"message": "done", ', 1)
    labels = complete(in_params, '"message": "done", ', 19, 4)
    check({"message", "level", "data"} <= labels, f"params: {labels}")
    typing_ref = fixed.replace('"${{inputs.url}}"', '"${{steps."', 1)
    check({"make", "fetch", "log"} <= complete(typing_ref, '${{steps.', 9, 5), "step ids")
    typing_ns = fixed.replace('"${{inputs.url}}"', '"${{"', 1)
    check({"steps", "inputs", "workflow", "secrets"} <= complete(typing_ns, '"${{', 4, 6), "namespaces")
    typing_input = fixed.replace('"${{inputs.url}}"', '"${{inputs."', 1)
    check("url" in complete(typing_input, "${{inputs.", 10, 7), "input names")
    print("ok - completion offers actions, parameters, step ids, namespaces and inputs")

    client.change(uri, fixed, 8)
    client.diagnostics(uri)
    target = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                        "position": position(fixed, '["make"]', 3)})
    check(target["range"]["start"] == position(fixed, '"make"', 1), target)
    refs = client.request("textDocument/references", {"textDocument": {"uri": uri},
                                                       "position": position(fixed, '"make"', 2),
                                                       "context": {"includeDeclaration": True}})
    check(len(refs) == 4, f"make is defined once and used three times: {refs}")
    print("ok - go to definition and find references work for step ids")

    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    check([s["name"] for s in symbols] == ["make", "fetch", "log"], symbols)

    opc_uri = "file:///tmp/flow.opc"
    client.open(opc_uri, OPC_FLOW, "opc")
    _, diags = client.diagnostics(opc_uri)
    check(diags == [], f"opc: {diags}")
    broken = OPC_FLOW.replace("step say   workflow.log", "step say   workflow.lgo")
    client.change(opc_uri, broken, 2)
    _, diags = client.diagnostics(opc_uri)
    check(diags and diags[0]["code"] == "E0040"
          and diags[0]["range"]["start"] == position(broken, "workflow.lgo"), f"opc diagnostics: {diags}")
    client.change(opc_uri, OPC_FLOW, 3)
    client.diagnostics(opc_uri)
    refs = client.request("textDocument/references", {"textDocument": {"uri": opc_uri},
                                                       "position": position(OPC_FLOW, "steps.make", 7),
                                                       "context": {"includeDeclaration": False}})
    starts = sorted((r["range"]["start"]["line"], r["range"]["start"]["character"]) for r in refs)
    after_emoji = position(OPC_FLOW, "steps.make", 6)
    check(starts == [(position(OPC_FLOW, "after make", 6)["line"], position(OPC_FLOW, "after make", 6)["character"]),
                     (after_emoji["line"], after_emoji["character"])], f"UTF-16 columns: {refs}")
    edits = client.request("textDocument/formatting", {"textDocument": {"uri": opc_uri},
                                                        "options": {"tabSize": 2, "insertSpaces": True}})
    formatted = apply(OPC_FLOW, edits)
    check("step say workflow.log after make" in formatted and "# caf" in formatted, formatted)
    print("ok - .opc: diagnostics, references in UTF-16 columns after non-ASCII text, formatting")

    other = "file:///tmp/package.json"
    client.open(other, '{"name": "not a workflow", "version": "1.0.0"}')
    _, diags = client.diagnostics(other)
    check(diags == [], f"a JSON file that is not a workflow: {diags}")
    print("ok - a JSON document that is not a workflow is left alone")

    folder = tempfile.mkdtemp(prefix="opcode-lsp-")
    with open(os.path.join(folder, "workflow.json"), "w") as f:
        f.write(JSON_FLOW.replace('"http.gett"', '"http.get"'))
    test_uri = "file://" + os.path.join(folder, "workflow.test.json")
    cases = '{"cases": [{"name": "a", "mocks": {"fetch": {"output": {"status_code": "200"}}, "mkae": {}}}]}'
    client.open(test_uri, cases)
    _, diags = client.diagnostics(test_uri)
    check(sorted(d["code"] for d in diags) == ["E0055", "E0056"], f"test file: {diags}")
    unknown = next(d for d in diags if d["code"] == "E0055")
    check(unknown["range"]["start"] == position(cases, '"mkae"'), unknown)
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": test_uri}, "range": unknown["range"],
                                                        "context": {"diagnostics": [unknown]}})
    fixed = apply(cases, actions[0]["edit"]["changes"][test_uri])
    check('"make"' in fixed, fixed)
    print("ok - a workflow test file gets diagnostics against the workflow beside it: unknown steps "
          "(with a fix), outputs its action never gives")

    big_uri = "file:///tmp/big.json"
    steps = [{"id": f"s{i}", "action": "workflow.log", "depends_on": [f"s{i-1}"] if i else [],
              "params": {"message": f"step {i} ${{{{inputs.x}}}}"}} for i in range(1000)]
    big = json.dumps({"steps": steps}, indent=1)
    client.open(big_uri, big)
    client.diagnostics(big_uri)
    latencies = []
    for version in range(2, 12):
        edited = big.replace('"step 500', f'"step {version}00', 1)
        sent = time.monotonic()
        client.change(big_uri, edited, version)
        at, _ = client.diagnostics(big_uri)
        latencies.append((at - sent) * 1000)
    latencies.sort()
    print(f"ok - 1,000-step workflow: diagnostics {latencies[len(latencies) // 2]:.1f} ms after a change "
          f"(median of 10; max {latencies[-1]:.1f} ms; this build)")
    client.stop()


if __name__ == "__main__":
    main(sys.argv[1])
