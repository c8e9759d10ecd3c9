"""The daemon's HTTP guard, attacked with raw sockets: empty and short
tokens refused at start, an empty sign-in cookie, an Origin with user info,
duplicate Host and Origin headers, a brute force at /login (throttled,
logged and counted), a CSRF token per browser session, `Secure` cookies
behind https, and X-CSRF-Token accepted as spec/panel.md says.

Usage: python guard.py PATH_TO_OPCODE
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

from common import TOKEN, call, check, operator_daemon

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mcp"))
from daemon import free_port  # noqa: E402


def raw(port, lines, body=b"", source="127.0.0.1"):
    """Sends one request exactly as written, from the loopback address
    `source`; (status, headers text, body)."""
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, head.decode("latin-1"), rest.decode("utf-8", "replace")


def get(port, path="/livez", extra=(), host="127.0.0.1"):
    return raw(port, [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", *extra])


def refused_tokens(binary):
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home)
        for args, settings in [(["--token", ""], None), (["--token", "short"], None), ([], {"token": ""})]:
            if settings is not None:
                os.makedirs(f"{home}/.opcode", exist_ok=True)
                with open(f"{home}/.opcode/settings.json", "w") as f:
                    json.dump(settings, f)
            done = subprocess.run([binary, "serve", "--listen", f"0.0.0.0:{free_port()}", "--db", f"{home}/o.db",
                                   *args], env=env, capture_output=True, text=True, timeout=30)
            check(done.returncode == 2 and "at least 16 characters" in done.stderr, f"{args} {settings}: {done}")
    print("ok - an empty or short token is refused at start, from the flag or the settings")


def guard_holds(binary):
    with tempfile.TemporaryDirectory() as home:
        log = f"{home}/daemon.log"
        daemon = operator_daemon(binary, home, log=log)
        port = daemon.port
        try:
            bearer = f"Authorization: Bearer {TOKEN}"
            check(get(port, extra=[bearer])[0] == 200, "the right token is refused")
            check(get(port, extra=["Cookie: opcode_token="])[0] == 401, "an empty sign-in cookie passes")
            check(get(port, extra=["Authorization: Bearer "])[0] == 401, "an empty bearer token passes")
            print("ok - empty bearer tokens and sign-in cookies are refused")

            evil = get(port, extra=[bearer, "Origin: http://127.0.0.1:1@evil.example"])
            check(evil[0] == 403, f"an origin with user info: {evil[0]}")
            check(get(port, extra=[bearer, "Origin: null"])[0] == 403, "Origin: null passes")
            check(get(port, extra=[bearer, f"Origin: http://localhost:{port}"])[0] == 200, "a loopback origin")
            two_hosts = raw(port, ["GET /livez HTTP/1.1", f"Host: 127.0.0.1:{port}", "Host: evil.example",
                                   bearer, "Connection: close"])
            check(two_hosts[0] == 400, f"two Host headers: {two_hosts[0]}")
            two_origins = get(port, extra=[bearer, f"Origin: http://127.0.0.1:{port}", "Origin: https://evil.example"])
            check(two_origins[0] == 400, f"two Origin headers: {two_origins[0]}")
            userinfo_host = get(port, extra=[bearer], host="127.0.0.1:1@evil.example")
            check(userinfo_host[0] == 400, f"a Host with user info: {userinfo_host[0]}")
            print("ok - strict Origin and Host: user info refused, duplicates are 400")

            with open(log) as f:
                logged_before = f.read().count("a request with a wrong token")
            started = time.time()
            statuses = []
            for _ in range(300):
                body = b"token=guess"
                statuses.append(raw(port, ["POST /login HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
                                           "Content-Type: application/x-www-form-urlencoded",
                                           f"Content-Length: {len(body)}"], body)[0])
            elapsed = time.time() - started
            wrong, throttled = statuses.count(401), statuses.count(429)
            check(wrong <= 10 and throttled >= 290, f"300 guesses in {elapsed:.1f}s: {wrong} checked, {throttled} refused")
            soon = get(port, extra=[bearer])
            check(soon[0] == 429 and "retry-after" in soon[1].lower(), f"the right token, too soon: {soon}")
            retry = int(re.search(r"Retry-After: (\d+)", soon[1], re.I).group(1))
            time.sleep(retry + 0.2)
            check(get(port, extra=[bearer])[0] == 200, "the right token after the delay")
            metrics = get(port, "/metrics", extra=[bearer])[2]
            counted = re.search(r'opcode_token_refusals_total\{reason="throttled"\} (\d+)', metrics)
            check(counted and int(counted.group(1)) >= throttled, f"throttled not counted: {counted}")
            with open(log) as f:
                logged = f.read().count("a request with a wrong token") - logged_before
            check(logged == wrong, f"{logged} wrong tokens logged, {wrong} checked")
            print(f"ok - 300 wrong tokens at /login: {wrong} checked, {throttled} throttled (429), logged, counted")

            first = get(port, "/login")
            second = get(port, "/login")
            tokens = [re.search(r'name="csrf-token" content="([^"]+)"', r[2]).group(1) for r in [first, second]]
            cookies = [re.search(r"Set-Cookie: (opcode_session=[^;]+)", r[1], re.I).group(1) for r in [first, second]]
            check(tokens[0] != tokens[1], "the sign-in page shows one CSRF token to every visitor")
            signed_in = raw(port, ["POST /login HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
                                   "Content-Type: application/x-www-form-urlencoded",
                                   f"Content-Length: {len('token=' + TOKEN)}"], f"token={TOKEN}".encode())
            token_cookie = re.search(r"Set-Cookie: (opcode_token=[^;]+)", signed_in[1], re.I).group(1)
            form = b'name=x&source={"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "hi"}}]}'

            def post(cookie, csrf_header=None, csrf_field=None):
                body = form + (f"&csrf={csrf_field}".encode() if csrf_field else b"")
                extra = [f"X-CSRF-Token: {csrf_header}"] if csrf_header else []
                return raw(port, ["POST /templates HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
                                  f"Cookie: {cookie}; {token_cookie}", *extra,
                                  "Content-Type: application/x-www-form-urlencoded",
                                  f"Content-Length: {len(body)}"], body)[0]
            check(post(cookies[0], csrf_field=tokens[1]) == 403, "another session's CSRF token is accepted")
            check(post(cookies[0], csrf_field=tokens[0]) == 303, "the session's own CSRF token is refused")
            check(post(cookies[1], csrf_header=tokens[1]) == 303, "X-CSRF-Token is refused")
            print("ok - a CSRF token per browser session, in the form field or the X-CSRF-Token header")
        finally:
            daemon.terminate()
    with tempfile.TemporaryDirectory() as home:
        daemon = operator_daemon(binary, home, args=["--base-url", "https://opcode.example"])
        try:
            signed_in = raw(daemon.port, ["POST /login HTTP/1.1", f"Host: 127.0.0.1:{daemon.port}", "Connection: close",
                                          "Content-Type: application/x-www-form-urlencoded",
                                          f"Content-Length: {len('token=' + TOKEN)}"], f"token={TOKEN}".encode())
            cookies = re.findall(r"Set-Cookie: ([^\r\n]+)", signed_in[1], re.I)
            check(cookies and all("Secure" in c and "HttpOnly" in c for c in cookies), f"cookies: {cookies}")
        finally:
            daemon.terminate()
    print("ok - cookies are Secure when the public URL is https")


def login(port, token, source="127.0.0.1", cookie=None):
    body = f"token={token}".encode()
    extra = [f"Cookie: {cookie}"] if cookie else []
    return raw(port, ["POST /login HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close", *extra,
                      "Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(body)}"], body,
               source=source)


def guessing_from_many_places(binary):
    hook_secret = "hook-secret-" + "0123456789abcdef"
    with tempfile.TemporaryDirectory() as home:
        daemon = operator_daemon(binary, home, env={"OPCODE_SECRET_HOOK_SECRET": hook_secret})
        port = daemon.port
        try:
            statuses = [login(port, "guess", source=f"127.0.0.{i}")[0] for i in range(1, 41) for _ in range(6)]
            wrong = statuses.count(401)
            check(wrong <= 10, f"240 guesses from 40 loopback addresses: {wrong} checked")
            print(f"ok - 240 guesses at /login from 40 loopback addresses: {wrong} checked (one network, one count)")

            planted = "opcode_session=" + "a" * 64
            signed_in = login(port, TOKEN, source="127.0.1.1", cookie=planted)
            check(signed_in[0] == 303 or signed_in[0] == 302 or signed_in[0] == 429, f"sign-in: {signed_in[0]}")
            if signed_in[0] == 429:
                time.sleep(int(re.search(r"Retry-After: (\d+)", signed_in[1], re.I).group(1)) + 0.2)
                signed_in = login(port, TOKEN, source="127.0.1.1", cookie=planted)
            session = re.search(r"Set-Cookie: opcode_session=([^;]+)", signed_in[1], re.I)
            check(session and session.group(1) != "a" * 64, f"the session is not renewed at sign-in: {signed_in[1]}")
            print("ok - signing in renews the panel session (a planted session id is worth nothing)")

            hook = {"name": "hooked", "triggers": {"webhook": {"secret": "HOOK_SECRET", "auth": "token"}},
                    "definition": {"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "x"}}]}}
            defined = call(daemon, "opcode.define", hook)
            check("version" in defined, f"the webhook template: {defined}")
            codes = []
            for _ in range(30):
                body = b"{}"
                codes.append(raw(port, ["POST /hooks/hooked HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
                                        "Authorization: Bearer wrong-guess-0123456789", "Content-Type: application/json",
                                        f"Content-Length: {len(body)}"], body, source="127.0.2.1")[0])
            check(codes.count(401) <= 10 and codes.count(429) >= 20, f"30 wrong webhook tokens: {codes}")
            print(f"ok - 30 wrong webhook tokens: {codes.count(401)} checked, {codes.count(429)} throttled")
        finally:
            daemon.terminate()


def main(binary):
    refused_tokens(binary)
    guard_holds(binary)
    guessing_from_many_places(binary)


if __name__ == "__main__":
    main(sys.argv[1])
