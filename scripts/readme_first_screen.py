#!/usr/bin/env python3
"""The README's first screen, run as a newcomer would: its commands against a stand-in app.

The block between `<!-- first-screen -->` and `<!-- /first-screen -->` in README.md holds the
commands a user runs in front of their own Meteor app (on `localhost:3000`), the bridge on
`localhost:8080`. Here `ddp-bridge demo-server` stands in for the app on a free loopback port,
the binary (DDP_BRIDGE_BIN) runs from another working directory, and every `$ ` line of the
block runs in order, with the ports put in:

- `ddp-bridge serve …` starts the bridge in the background (stopped at the end);
- `export TOKEN=…` takes the token from the previous command's answer;
- every other command must exit 0, and print no `"error"` and no `FAIL`.

A command of the block that this script cannot run fails it: the README and this check change
together. Loopback only; every wait bounded. Standard library only.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from front_harness import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(os.environ.get("DDP_BRIDGE_BIN", os.path.join(ROOT, ".build/debug/ddp-bridge")))
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def first_screen():
    """The `$ ` commands of the README's first screen, continuation lines joined."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    match = re.search(r"<!-- first-screen -->(.*?)<!-- /first-screen -->", text, re.S)
    if not match:
        return None
    commands, current = [], None
    for line in match.group(1).splitlines():
        if line.startswith("$ "):
            current = line[2:]
            commands.append(current)
        elif current is not None and commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1] + " " + line.strip()
    return commands


def wait_ready(port, limit=30):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def listening(port, limit=30):
    """Whether something accepts connections on `port` within `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def main():
    commands = first_screen()
    check("the README has a first screen of commands", bool(commands))
    if not commands:
        return 1
    app, bridge = free_ports(2)
    elsewhere = tempfile.mkdtemp(prefix="ddp-bridge-first-screen-")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DDP_BRIDGE_")}

    def localize(command):
        command = command.replace("localhost:3000", f"127.0.0.1:{app}").replace("localhost:8080", f"127.0.0.1:{bridge}")
        command = command.replace("--port 8080", f"--port {bridge}")
        return re.sub(r"^ddp-bridge ", f"'{BIN}' ", command)

    processes = [subprocess.Popen([BIN, "demo-server", "--host", "127.0.0.1", "--port", str(app)], cwd=elsewhere,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=environment)]
    token, previous = None, ""
    try:
        check("the stand-in app listens", listening(app))
        for command in commands:
            if command.startswith("ddp-bridge serve "):
                argv = ["bash", "-c", "exec " + localize(command)]
                processes.append(subprocess.Popen(argv, cwd=elsewhere, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                  stdin=subprocess.DEVNULL, env=environment))
                check(f"`{command}` serves", wait_ready(bridge))
                continue
            if command.startswith("export TOKEN="):
                try:
                    token = json.loads(previous)["token"]
                except (ValueError, KeyError, TypeError):
                    token = None
                check(f"`{command}`: the previous answer has a token", bool(token), previous[:200])
                continue
            try:
                done = subprocess.run(["bash", "-c", localize(command)], cwd=elsewhere, capture_output=True, text=True, timeout=30,
                                      env={**environment, **({"TOKEN": token} if token else {})}, stdin=subprocess.DEVNULL)
                previous, status = done.stdout.strip(), done.returncode
            except subprocess.TimeoutExpired:
                previous, status = "", None
            ok = status == 0 and '"error"' not in previous and "FAIL" not in previous and previous != ""
            check(f"`{command}`", ok, previous[:300] if not ok else previous.splitlines()[0][:120])
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    print(f"README first screen: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
