"""The README's Neovim snippet, run by the Neovim installed here (Debian's
0.7.2 takes the snippet for older versions; 0.11+ the other): opening a
broken workflow must show opcodec's diagnostic.

Usage: python neovim.py PATH_TO_OPCODEC_FOLDER
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def snippets():
    """The README's Neovim snippets: (for 0.11 and newer, for older)."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = readme[readme.index("**Neovim**"):]
    blocks = re.findall(r"```lua\n(.*?)```", section, re.S)
    return blocks[0], blocks[1]


def version():
    first = subprocess.run(["nvim", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return tuple(int(n) for n in re.search(r"v(\d+)\.(\d+)", first).groups())


def main(bins):
    newer, older = snippets()
    nvim = version()
    snippet = newer if nvim >= (0, 11) else older
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "init.lua")
        with open(config, "w") as f:
            f.write(snippet)
        with open(os.path.join(folder, "w.json"), "w") as f:
            f.write('{"steps": [{"id": "a", "action": "crypto.hsh"}]}\n')
        # Waits for the first diagnostic (30 s at most), then prints it.
        report = ("lua vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 100); "
                  "local d = vim.diagnostic.get(0); "
                  "io.stdout:write(#d > 0 and d[1].message or 'no diagnostic', '\\n')")
        done = subprocess.run(
            ["nvim", "--headless", "-u", config, "w.json", "-c", report, "-c", "qa!"],
            cwd=folder, env=dict(os.environ, PATH=bins + os.pathsep + os.environ["PATH"]),
            capture_output=True, text=True, timeout=60)
        said = done.stdout + done.stderr
        if "crypto.hsh" not in said:
            raise AssertionError(f"Neovim {nvim} with the README's snippet: {said}")
    print(f"ok - Neovim {nvim[0]}.{nvim[1]} with the README's snippet shows opcodec's diagnostics")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
