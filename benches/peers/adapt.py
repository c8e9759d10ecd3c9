#!/usr/bin/env python3
"""Adapts a copy of ../shared/bench-peers to today's daemon; each edit once.

- the two Rust crates get an empty `[workspace]` (the copy sits inside this
  workspace's `target/`);
- the daemon isolates by default, so `fs.*` reaches only a run's workspace:
  the harness's daemon gets a settings file that lets it read its own home,
  where the tiny file the `stat` variant reads is;
- `opcode.run` answers counts by status (`step_counts`) unless steps are
  asked for: the harness and its Rust client count those.

Usage: adapt.py TARGET (the copied folder). Fails if an edit no longer
applies, rather than benchmarking something else.
"""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])


def edit(rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    if new in text:
        return
    if text.count(old) != 1:
        sys.exit(f"adapt.py: {rel} changed; this edit no longer applies:\n{old}")
    path.write_text(text.replace(old, new))


for manifest in ("dbos-rust/Cargo.toml", "opcode-rs/client/Cargo.toml"):
    path = root / manifest
    text = path.read_text()
    if "\n[workspace]" not in text:
        path.write_text(text.rstrip("\n") + "\n\n[workspace]\n")

edit(
    "opcode-rs/bench_opcode.py",
    "        env = dict(os.environ, HOME=self.home, OPCODE_DURABILITY=durability)\n",
    "        env = dict(os.environ, HOME=self.home, OPCODE_DURABILITY=durability)\n"
    "        # Isolated by default, fs.* reaches the run's workspace only: the tiny file is in HOME.\n"
    "        os.makedirs(os.path.join(self.home, \".opcode\"), exist_ok=True)\n"
    "        with open(os.path.join(self.home, \".opcode\", \"settings.json\"), \"w\") as f:\n"
    "            json.dump({\"isolation\": {\"fs\": {\"read\": [self.home]}}}, f)\n",
)
edit(
    "opcode-rs/bench_opcode.py",
    "    if sc.get(\"status\") != \"completed\" or len(sc.get(\"steps\") or {}) != n:\n",
    "    if \"steps\" not in sc:  # counts by status unless steps are asked for\n"
    "        sc = dict(sc, steps={f\"s{i}\": {\"status\": s} for i, s in enumerate(\n"
    "            s for s, k in (sc.get(\"step_counts\") or {}).items() for _ in range(k))})\n"
    "    if sc.get(\"status\") != \"completed\" or len(sc.get(\"steps\") or {}) != n:\n",
)
edit(
    "opcode-rs/client/src/main.rs",
    "    assert_eq!(sc[\"steps\"].as_object().map(|m| m.len()), Some(steps), \"{msg}\");\n",
    "    // Counts by status unless steps are asked for.\n"
    "    let counted = sc[\"step_counts\"].as_object().map(|m| m.values().filter_map(Value::as_u64).sum::<u64>() as usize);\n"
    "    assert_eq!(sc[\"steps\"].as_object().map(|m| m.len()).or(counted), Some(steps), \"{msg}\");\n",
)
