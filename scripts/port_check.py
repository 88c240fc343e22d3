#!/usr/bin/env python3
"""Ports taken: the bridge never hangs silently. And `--version` says what is running, and the web
console is served wherever the binary is started from.

With another program listening on the port it would use, `ddp-bridge serve`, `demo` (its own
port, or the demo DDP server's) and `demo-server` must end within two seconds with status 1 and
one line naming the address, the setting that chooses it and the cause. And `demo` with port
3000 taken (a Meteor app's default) must start anyway: its DDP server takes a free port unless
`--ddp-port` names one. Loopback only; every wait bounded. Standard library only.
"""
import os
import socket
import subprocess
import sys
import time

BIN = os.environ.get("DDP_BRIDGE_BIN", ".build/debug/ddp-bridge")
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def taken(port=0):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


holder = taken()
port = holder.getsockname()[1]
cases = [
    ("serve --port", ["serve", "--upstream", "ws://127.0.0.1:1/websocket", "--port", str(port), "--public-dir", "none"], "(--port, DDP_BRIDGE_PORT)"),
    ("demo --port", ["demo", "--port", str(port), "--public-dir", "none"], "(--port, DDP_BRIDGE_PORT)"),
    ("demo --ddp-port", ["demo", "--ddp-port", str(port), "--port", "0", "--public-dir", "none"], "(--ddp-port)"),
    ("demo-server --port", ["demo-server", "--port", str(port)], "(--port)"),
]
for name, argv, setting in cases:
    started = time.monotonic()
    try:
        done = subprocess.run([BIN] + argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        check(f"{name} on a port in use ends at once", False, "still running after 10 s (a silent hang)")
        continue
    elapsed = time.monotonic() - started
    line = (done.stderr.strip().splitlines() or [""])[-1]
    expected = f"cannot listen on 127.0.0.1:{port} {setting}: address already in use"
    check(f"{name} on a port in use ends within 2 s with status 1 and says why", done.returncode == 1 and elapsed < 2 and expected in line,
          f"status {done.returncode}, {elapsed:.2f} s, {line!r}")
holder.close()

# Port 3000 taken, as by a Meteor app beside the demo: the demo starts on a free port anyway.
try:
    meteor = taken(3000)
except OSError:
    meteor = None  # something already listens on 3000: the case holds all the same
process = subprocess.Popen([BIN, "demo", "--port", "0", "--public-dir", "none"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
banner, deadline = "", time.monotonic() + 15
os.set_blocking(process.stdout.fileno(), False)
while time.monotonic() < deadline and "ddp-bridge:      http://" not in banner and process.poll() is None:
    chunk = process.stdout.read() or b""
    banner += chunk.decode("utf-8", "replace")
    if not chunk:
        time.sleep(0.05)
check("demo with port 3000 taken starts, its DDP server on a free port", "ddp-bridge:      http://" in banner and "127.0.0.1:3000/" not in banner,
      banner.strip().splitlines()[0] if banner.strip() else f"status {process.poll()}")
process.terminate()
try:
    process.wait(timeout=10)
except subprocess.TimeoutExpired:
    process.kill()
if meteor:
    meteor.close()
# The web console ships with the binary: started from a folder with no console in it (and with
# nothing naming the console's folder), the demo serves the console's page at / all the same.
import tempfile
import urllib.request
elsewhere = tempfile.mkdtemp(prefix="ddp-bridge-elsewhere-")
environment = {k: v for k, v in os.environ.items() if k != "DDP_BRIDGE_PUBLIC_DIR"}
process = subprocess.Popen([os.path.abspath(BIN), "demo", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, cwd=elsewhere, env=environment)
banner, deadline = "", time.monotonic() + 15
os.set_blocking(process.stdout.fileno(), False)
while time.monotonic() < deadline and "web console:" not in banner and process.poll() is None:
    chunk = process.stdout.read() or b""
    banner += chunk.decode("utf-8", "replace")
    if not chunk:
        time.sleep(0.05)
address = next((line.split()[-1] for line in banner.splitlines() if line.startswith("ddp-bridge:")), None)
page = ""
if address:
    try:
        with urllib.request.urlopen(address + "/", timeout=5) as answer:
            page = answer.read().decode("utf-8", "replace")
    except OSError as error:
        page = f"GET / failed: {error}"
shown = (page or banner).strip().splitlines()
check("started from another folder, the demo serves the console at /", "<title>ddp-bridge console</title>" in page,
      f"GET {address}/: {shown[0][:120]}" if shown else f"status {process.poll()}")
process.terminate()
try:
    process.wait(timeout=10)
except subprocess.TimeoutExpired:
    process.kill()
os.rmdir(elsewhere)
# The version and the commit of the build (the repository's HEAD here, `-modified` if it differs).
import re
version = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=10)
check("--version prints the version and the commit", version.returncode == 0 and re.fullmatch(
    r"\d+\.\d+\.\d+ \(commit ([0-9a-f]{7,}(-modified)?|unknown)\)", version.stdout.strip()) is not None, version.stdout.strip())
print(f"ports: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
