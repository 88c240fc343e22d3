#!/usr/bin/env python3
"""`ddp-bridge check` as an operator runs it: the binary, from another working directory.

Against `ddp-bridge demo-server` on a free loopback port: every step succeeds (connect, log in,
subscribe), the password may come from DDP_BRIDGE_PASSWORD and the upstream from
DDP_BRIDGE_UPSTREAM; a wrong password fails at the login with the app's reason, an unknown
publication at the subscription, the URL without /websocket at the connection with the fix, and a
closed port says connection refused; each failure exits 1 with a `fix:` line, and a setting check
does not take is refused. Loopback only; every wait bounded. Standard library only.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BIN = os.path.abspath(os.environ.get("DDP_BRIDGE_BIN", ".build/debug/ddp-bridge"))
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


elsewhere = tempfile.mkdtemp(prefix="ddp-bridge-check-")
environment = {k: v for k, v in os.environ.items() if not k.startswith("DDP_BRIDGE_")}


def run(*argv, env=None):
    """The check's exit status, its output and how long it took (from a folder of its own)."""
    started = time.monotonic()
    try:
        done = subprocess.run([BIN, "check", *argv], capture_output=True, text=True, timeout=30, cwd=elsewhere,
                              env={**environment, **(env or {})}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, "", "still running after 30 s", 30.0
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


server = subprocess.Popen([BIN, "demo-server", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, cwd=elsewhere)
banner, deadline = "", time.monotonic() + 15
os.set_blocking(server.stdout.fileno(), False)
while time.monotonic() < deadline and "/websocket" not in banner and server.poll() is None:
    chunk = server.stdout.read() or b""
    banner += chunk.decode("utf-8", "replace")
    if not chunk:
        time.sleep(0.05)
url = next((word for word in banner.split() if word.startswith("ws://")), None)
check("demo-server starts and names its URL", url is not None, banner.strip())
try:
    if url:
        status, out, err, _ = run("--upstream", url)
        check("check connects and exits 0", status == 0 and out == f"ok  connected to {url} (DDP 1)\n", f"{status} {out!r} {err!r}")

        status, out, err, _ = run("--upstream", url, "--username", "alice", "--password", "secret", "--publication", "tasks")
        lines = out.splitlines()
        check("check logs in and subscribes, one line per step", status == 0 and len(lines) == 3
              and lines[1].startswith("ok  logged in as alice (user id ")
              and lines[2] == "ok  subscribed to tasks: 3 documents in 1 collection (tasks)", f"{status} {out!r} {err!r}")

        status, out, err, _ = run("--username", "alice", "--publication", "tasks", "--params", '[{"listId":"inbox"}]',
                                  env={"DDP_BRIDGE_UPSTREAM": url, "DDP_BRIDGE_PASSWORD": "secret"})
        check("the upstream and the password may come from DDP_BRIDGE_ variables; --params reach the publication",
              status == 0 and out.endswith("ok  subscribed to tasks: 2 documents in 1 collection (tasks)\n"), f"{status} {out!r} {err!r}")

        status, out, err, _ = run("--upstream", url, "--username", "alice", "--password", "wrong", "--publication", "tasks")
        check("a wrong password fails at the login with the app's reason and a fix, exit 1",
              status == 1 and "FAIL cannot log in as alice: Incorrect password [403]\n     fix: " in out and "subscribe" not in out,
              f"{status} {out!r} {err!r}")

        status, out, err, _ = run("--upstream", url, "--publication", "nosuch")
        check("an unknown publication fails at the subscription, exit 1",
              status == 1 and "FAIL cannot subscribe to nosuch: Subscription 'nosuch' not found [404]\n     fix: " in out, f"{status} {out!r} {err!r}")

        root = url[: -len("/websocket")]
        status, out, err, took = run("--upstream", root)
        check("the app's address without /websocket fails at once, saying to add it",
              status == 1 and out.startswith(f"FAIL cannot connect to {root}: the upstream answered the WebSocket upgrade")
              and f"fix: add /websocket to the upstream URL (Meteor serves DDP there): {url}\n" in out and took < 5,
              f"{status} {took:.2f} s {out!r} {err!r}")

    port = closed_port()
    status, out, err, took = run("--upstream", f"ws://127.0.0.1:{port}/websocket", "--timeout", "3")
    check("a closed port says connection refused, with the fix, exit 1",
          status == 1 and f"nothing is listening at 127.0.0.1:{port} (connection refused)" in out and "fix: start the Meteor app" in out
          and took < 5, f"{status} {took:.2f} s {out!r} {err!r}")

    status, out, err, _ = run("--upstream", f"ws://127.0.0.1:{port}/websocket", "--port", "8080")
    check("a setting check does not take is refused", status not in (0, 1, None) and "check does not take --port" in err,
          f"{status} {err.strip()!r}")
finally:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
    shutil.rmtree(elsewhere, ignore_errors=True)
print(f"check: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
