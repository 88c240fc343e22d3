"""Shared pieces of the tests of what runs in front of the bridge (scripts/tls_front_test.py,
scripts/proxy_stream_test.py): PASS/FAIL checks, processes in process groups of their own (their
group ids written to WORK/pids, so the calling shell script can kill what a killed driver left),
bounded waits, the demo DDP server and a bridge, and an event stream read by curl with each
event's arrival time. Loopback only. Standard library only."""
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import time

HOST = "127.0.0.1"


class Checks:
    def __init__(self, prefix):
        self.prefix, self.passed, self.failed = prefix, 0, []

    def check(self, name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name}" + (f" — {detail}" if detail else ""), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def summary(self, started):
        print(f"{self.prefix}: {self.passed} passed, {len(self.failed)} failed, {time.monotonic() - started:.1f} s", flush=True)
        return 1 if self.failed else 0


class Fatal(Exception):
    """A step the rest cannot run without failed (already reported)."""


def free_port():
    return free_ports(1)[0]


def free_ports(count):
    """`count` distinct free ports: each socket stays bound until all are chosen (one closed
    before the next was bound could be handed out twice, and HAProxy, binding with SO_REUSEPORT,
    would then share one port between two fronts)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def wait_until(predicate, timeout, interval=0.1):
    """Calls predicate until it returns something truthy (returned) or `timeout` seconds pass (None)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (OSError, http.client.HTTPException, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


class Processes:
    def __init__(self, work):
        self.work, self.children = work, {}

    def start(self, name, argv, env=None):
        with open(os.path.join(self.work, f"{name}.log"), "ab") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                       start_new_session=True, cwd=self.work)
        self.children[name] = process
        with open(os.path.join(self.work, "pids"), "a") as file:
            file.write(f"{process.pid}\n")
        return process

    def log(self, name, lines=15):
        try:
            with open(os.path.join(self.work, f"{name}.log"), errors="replace") as file:
                return "".join(file.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, name, timeout=8.0):
        process = self.children.get(name)
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # what is left of its group
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass

    def stop_all(self):
        for name in reversed(list(self.children)):
            self.stop(name)


def start_demo_server(procs, binary, checks):
    port = free_port()
    procs.start("demo-server", [binary, "demo-server", "--host", HOST, "--port", str(port)])
    if not checks.check("ddp-bridge demo-server is up", bool(wait_until(lambda: port_open(port), 15)),
                        f"ws://{HOST}:{port}/websocket" if port_open(port) else procs.log("demo-server")):
        raise Fatal("demo-server")
    return port


def start_bridge(procs, binary, checks, name, ddp_port, extra=()):
    port = free_port()
    argv = [binary, "serve", "--upstream", f"ws://{HOST}:{ddp_port}/websocket", "--host", HOST, "--port", str(port),
            "--trusted-proxies", HOST, "--log-level", "notice", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDP_BRIDGE_")}
    procs.start(name, argv, env=env)
    ok = wait_until(lambda: request(port, "GET", "/readyz", timeout=2)[0] == 200, 20, 0.2)
    if not checks.check(f"{name} ready", bool(ok), f"{HOST}:{port}" if ok else procs.log(name)):
        raise Fatal(name)
    return port


def request(port, method, path, body=None, headers=None, tls=False, timeout=10):
    """One request on a connection of its own: (status, {lower-case header: [values]}, body text)."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        connection = http.client.HTTPSConnection(HOST, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(HOST, port, timeout=timeout)
    sent = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        received = {}
        for key, value in response.getheaders():
            received.setdefault(key.lower(), []).append(value)
        return response.status, received, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def login(port, tls=False):
    status, headers, body = request(port, "POST", "/v1/sessions", {"username": "alice", "password": "secret"}, tls=tls)
    if status != 201:
        raise ValueError(f"login: {status} {body[:200]}")
    return json.loads(body)["token"], headers


def curl_events(url, token, wanted, seconds, extra=()):
    """Follows an event stream with `curl -sN` (extra: --http2 -k, -H …) until `wanted` `changed`
    events came or `seconds` passed. Returns (events [(arrival in seconds since the request,
    name, data)], curl's stderr: the response's status line and headers, as -D printed them)."""
    argv = ["curl", "-sN", "-D", "/dev/stderr", "--max-time", str(seconds + 5), "-H", f"authorization: Bearer {token}",
            "-H", "accept: text/event-stream", *extra, url]
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    events, pending, name, data = [], b"", None, []
    deadline = started + seconds
    try:
        while time.monotonic() < deadline and sum(1 for e in events if e[1] == "changed") < wanted:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, min(0.2, deadline - time.monotonic())))
            if not ready:
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            arrived = time.monotonic() - started
            pending += chunk
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if line == "":
                    if name or data:
                        events.append((arrived, name or "message", "\n".join(data)))
                    name, data = None, []
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
    finally:
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate(timeout=5)
    return events, stderr.decode("utf-8", "replace")


def spread(events, rate, wanted):
    """Whether `changed` events arrived one by one, as a ticker at `rate` per second sends them:
    all `wanted` came; their arrival times span at least 60 % of (wanted - 1) / rate; and at
    least wanted - 2 of the gaps between them are longer than a third of the period (events
    that came in one read share an arrival time, so a buffered stream has gaps of 0). Returns
    (ok, text)."""
    times = [t for t, name, _ in events if name == "changed"]
    period = 1.0 / rate
    gaps = [b - a for a, b in zip(times, times[1:])]
    span = times[-1] - times[0] if times else 0.0
    apart = sum(1 for g in gaps if g > period / 3)
    ok = len(times) >= wanted and span >= 0.6 * (wanted - 1) * period and apart >= wanted - 2
    text = (f"{len(times)} changed events at " + ", ".join(f"{t:.2f}" for t in times) + f" s; span {span:.2f} s "
            f"(ticker: {(wanted - 1) * period:.2f} s), {apart} of {len(gaps)} gaps over {period / 3 * 1000:.0f} ms")
    return ok, text
