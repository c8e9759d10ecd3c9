"""Runs inside a `shell.exec` step, in the daemon's default sandbox, and
tries every escape it knows; prints one JSON report of what it could do.

Usage (as a step's command): python3 -c SOURCE NONCE DAEMON_PID PORT HOME DB

Every probe reports data, never a verdict: the test reads the report and
checks the host. A probe that cannot run reports its error.
"""

import errno
import json
import os
import socket
import subprocess
import sys

NONCE, DAEMON_PID, PORT, HOME, DB = sys.argv[1:6]
report = {}


def sh(command):
    child = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, 9)
        return {"exit": "timeout", "out": ""}
    return {"exit": child.returncode, "out": out[-2000:]}


def status_fields():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return {k: fields.get(k) for k in ["Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                      "NoNewPrivs", "Seccomp"]}


report["status"] = status_fields()
report["id"] = sh("id")

# The host's root file system, remounted writable.
report["remount"] = sh(f"mount -o remount,rw,bind / && touch /var/tmp/opcode-escape-{NONCE}")
report["remount_proc_sys"] = sh("mount -o remount,rw /proc/sys")

# /proc/sys: write back the value it holds (harmless where it succeeds).
try:
    with open("/proc/sys/vm/overcommit_ratio") as f:
        value = f.read()
    with open("/proc/sys/vm/overcommit_ratio", "w") as f:
        f.write(value)
    report["proc_sys_write"] = "ok"
except OSError as e:
    report["proc_sys_write"] = errno.errorcode.get(e.errno, str(e))

# Unmount the sandbox's /proc and read the host's: every environment.
report["umount_proc"] = sh("umount /proc || umount -l /proc")
environs = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environs[pid] = f.read().decode("utf-8", "replace")[:4000]
        except OSError:
            pass
report["environs"] = environs
report["visible_pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report["daemon_visible"] = os.path.exists(f"/proc/{DAEMON_PID}/cmdline")

# The daemon, over the network, directly and from its namespace.
def connect():
    try:
        socket.create_connection(("127.0.0.1", int(PORT)), timeout=2).close()
        return "connected"
    except OSError as e:
        return str(e)


report["connect"] = connect()
reach = f"import socket; socket.create_connection(('127.0.0.1', {PORT}), timeout=2); print('entered')"
report["nsenter"] = sh(f"nsenter -t {DAEMON_PID} -n -- python3 -c \"{reach}\"")
report["nsenter_init"] = sh("nsenter -t 1 -a -- /bin/true && echo entered")

# The default workspace, and the daemon's own files.
report["cwd"] = os.getcwd()
report["cwd_listing"] = sorted(os.listdir("."))
report["home_listing"] = sh(f"ls -la {HOME} {HOME}/.opcode")
files = {}
for name in ["vault.key", "settings.json", "opcode.db"]:
    for path in [f"{HOME}/.opcode/{name}", f"{HOME}/{name}", name, f".opcode/{name}"]:
        try:
            with open(path, "rb") as f:
                files[path] = f.read(4000).decode("utf-8", "replace")
        except OSError as e:
            files[path] = "error: " + (errno.errorcode.get(e.errno) or str(e))
report["files"] = files
report["db_write"] = sh(f"python3 -c \"import sqlite3; c = sqlite3.connect('{DB}'); "
                        f"c.execute('CREATE TABLE pwned_{NONCE} (x)'); c.commit(); print('wrote')\"")

# Syscalls a sandboxed process has no business making, each tried in a
# child process of its own (one that succeeds changes the process).
SYSCALLS = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def string(text):
    return ctypes.addressof(ctypes.create_string_buffer(text))
def syscall(number, *args):
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
CALLS = {
    "mount": lambda: syscall(165, string(b"none"), string(b"/tmp"), string(b"tmpfs"), 0, 0),
    "umount2": lambda: syscall(166, string(b"/proc"), 2),
    "setns": lambda: syscall(308, os.open("/proc/self/ns/net", os.O_RDONLY), 0),
    "unshare_user": lambda: syscall(272, CLONE_NEWUSER),
    "unshare_mount": lambda: syscall(272, CLONE_NEWNS),
    "clone_newuser": lambda: syscall(56, CLONE_NEWUSER | 17, 0, 0, 0, 0),
    "ptrace": lambda: syscall(101, 0, 0, 0, 0),
    "kexec_load": lambda: syscall(246, 0, 0, 0, 0),
    "init_module": lambda: syscall(175, 0, 0, 0),
    "finit_module": lambda: syscall(313, -1, 0, 0),
    "delete_module": lambda: syscall(176, string(b"nonexistent"), 0),
    "bpf": lambda: syscall(321, 0, 0, 0),
    "keyctl": lambda: syscall(250, 0, -3, 0),
    "add_key": lambda: syscall(248, 0, 0, 0, 0, 0),
    "perf_event_open": lambda: syscall(298, 0, 0, -1, -1, 0),
    "open_by_handle_at": lambda: syscall(304, -100, 0, 0),
    "pivot_root": lambda: syscall(155, string(b"/tmp"), string(b"/tmp")),
    "chroot": lambda: syscall(161, string(b"/tmp")),
    "swapon": lambda: syscall(167, 0, 0),
    "userfaultfd": lambda: syscall(323, 0),
}
if len(sys.argv) > 1:
    print(CALLS[sys.argv[1]]())
else:
    print(" ".join(CALLS))
"""
names = subprocess.run([sys.executable, "-c", SYSCALLS], capture_output=True, text=True).stdout.split()
calls = {}
for name in names:
    try:
        done = subprocess.run([sys.executable, "-c", SYSCALLS, name], capture_output=True, text=True, timeout=5)
        calls[name] = done.stdout.strip() or f"died ({done.returncode}): {done.stderr[-300:]}"
    except subprocess.TimeoutExpired:
        calls[name] = "timeout"
report["syscalls"] = calls
report["unshare_cmd"] = sh("unshare -U -r /bin/true && echo unshared")
report["mknod"] = sh("mknod /tmp/disk b 254 0 && echo made")
report["devices"] = sorted(os.listdir("/dev"))
report["raw_disk"] = sh("for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/mem /dev/kmem; do "
                        "[ -e $d ] && head -c 16 $d >/dev/null 2>&1 && echo read $d; done; true")
print(json.dumps(report))
