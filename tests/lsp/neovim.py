"""The README's Neovim snippet, run by the Neovim installed here (Debian's
0.7.2 takes the snippet for older versions; 0.11+ the other): opening a
broken workflow, JSON or `.opc`, must show opcodec's diagnostic; without
`opcodec` on PATH, opening either must raise no error at all.

Usage: python neovim.py PATH_TO_OPCODEC_FOLDER
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# A broken workflow in each syntax; a `.opc` file that starts with a
# comment is what Neovim 0.7's own detection takes for `conf`.
BROKEN = {
    "w.json": '{"steps": [{"id": "a", "action": "crypto.hsh"}]}\n',
    "w.opc": "# checks a digest\nstep a crypto.hsh\n",
}


def snippets():
    """The README's Neovim snippets: (for 0.11 and newer, for older)."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = readme[readme.index("**Neovim**"):]
    blocks = re.findall(r"```lua\n(.*?)```", section, re.S)
    return blocks[0], blocks[1]


def version():
    first = subprocess.run(["nvim", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return tuple(int(n) for n in re.search(r"v(\d+)\.(\d+)", first).groups())


def nvim(folder, config, file, path, report):
    """Opens `file` in headless Neovim with `config`; answers what it said."""
    done = subprocess.run(
        ["nvim", "--headless", "-u", config, file, "-c", report, "-c", "qa!"],
        cwd=folder, env=dict(os.environ, PATH=path), capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def main(bins):
    newer, older = snippets()
    version_here = version()
    snippet = newer if version_here >= (0, 11) else older
    # Waits for the first diagnostic (30 s at most), then prints it.
    diagnostics = ("lua vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 100); "
                   "local d = vim.diagnostic.get(0); "
                   "io.stdout:write(vim.bo.filetype, ': ', #d > 0 and d[1].message or 'no diagnostic', '\\n')")
    quiet = "lua io.stdout:write('filetype ', vim.bo.filetype, '\\n')"
    # A PATH without opcodec: the system's folders only.
    bare = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if not os.path.exists(os.path.join(p, "opcodec")))
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "init.lua")
        with open(config, "w") as f:
            f.write(snippet)
        for name, text in BROKEN.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
            kind = name.split(".")[1]
            said = nvim(folder, config, name, bins + os.pathsep + os.environ["PATH"], diagnostics)
            if f"{kind}: " not in said or "crypto.hsh" not in said:
                raise AssertionError(f"Neovim {version_here} with the README's snippet, {name}: {said}")
            said = nvim(folder, config, name, bare, quiet)
            if f"filetype {kind}" not in said or re.search(r"(?i)error|E\d{3,4}:", said):
                raise AssertionError(f"Neovim {version_here} without opcodec on PATH, {name}: {said}")
    print(f"ok - Neovim {version_here[0]}.{version_here[1]} with the README's snippet: opcodec's "
          "diagnostics in JSON and .opc files, no error without opcodec")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
