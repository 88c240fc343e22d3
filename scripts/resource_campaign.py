#!/usr/bin/env python3
"""Resource campaign: one client tries to take what everyone else needs; another must not notice.

The bridge (DDP_BRIDGE_BIN) runs as its own process in front of `ddp-bridge demo-server`, with a
memory budget of 128 MiB (an address's share 25 %, anonymous sessions 10 %), at most 64
connections per address, and `tasks(*)` public. Then, for a bounded time, from 127.0.0.2:

- anonymous sessions, each subscribing to `bulk` with 20,000 documents, until refused;
- public reads of `tasks` with distinct params (each a new upstream subscription), until refused;
- idle TCP connections, 200 of them, held to the end;

while, from 127.0.0.3, a logged-in client logs in, subscribes, reads, makes public reads and opens
event streams over and over: none of its requests may be refused. The bridge's resident memory is
sampled throughout: its peak must stay under the baseline plus the budget plus a 64 MiB margin
(what the budget does not count: encodings, connections, the allocator). At the end the bridge
still answers `/healthz`.

Prints each check (PASS/FAIL), the figures (RSS baseline and peak, refusals by reason, the other
client's request count, p50/p99 and errors), writes them as JSON to --out, and exits 1 if a
check failed. Every wait is bounded; traffic goes to loopback only. Standard library only.
"""
import argparse
import collections
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HOST = "127.0.0.1"
ATTACKER, OTHER = "127.0.0.2", "127.0.0.3"
BUDGET = 128 << 20
MARGIN = 64 << 20


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def request(port, method, path, source, token=None, body=None, timeout=20):
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(HOST, port, timeout=timeout, source_address=(source, 0))
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
        try:
            payload = json.loads(text) if text else None
        except ValueError:
            payload = None
        return response.status, payload
    finally:
        connection.close()


def error_code(payload):
    return payload.get("error") if isinstance(payload, dict) else None


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Campaign:
    def __init__(self, binary, work, seconds):
        self.binary, self.work, self.seconds = binary, work, seconds
        self.failed, self.passed = [], 0
        self.refusals = collections.Counter()
        self.attack = collections.Counter()
        self.other_latencies, self.other_errors = [], []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.processes = []

    def check(self, name, ok, detail=""):
        print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)

    def start(self, name, argv):
        log = open(os.path.join(self.work, f"{name}.log"), "ab")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.processes.append(process)
        return process

    def wait_ready(self, port, limit=30):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if request(port, "GET", "/readyz", HOST, timeout=2)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    # The one who takes.

    def sessions(self, port):
        for _ in range(100):
            if self.stop.is_set():
                return
            status, payload = request(port, "POST", "/v1/sessions", ATTACKER, body={})
            if status != 201:
                self.refuse("sessions", status, payload)
                continue
            token = payload["token"]
            status, payload = request(port, "POST", "/v1/subscriptions", ATTACKER, token=token, body={"name": "bulk", "params": [20000], "timeout": 20000})
            if status == 201:
                with self.lock:
                    self.attack["bulk subscriptions loaded"] += 1
            else:
                self.refuse("bulk subscriptions", status, payload)

    def public_reads(self, port):
        for n in range(200):
            if self.stop.is_set():
                return
            query = urllib.parse.urlencode({"subscribe": "tasks", "params": json.dumps([n])})
            status, payload = request(port, "GET", f"/v1/public/collections/tasks?{query}", ATTACKER)
            if status == 200:
                with self.lock:
                    self.attack["distinct public reads served"] += 1
            else:
                self.refuse("public reads", status, payload)

    def idle_connections(self, port, held):
        for _ in range(200):
            sock = socket.socket()
            sock.settimeout(2)
            try:
                sock.bind((ATTACKER, 0))
                sock.connect((HOST, port))
            except OSError:
                sock.close()
                self.refuse("idle connections", 0, {"error": "connect-failed"})
                continue
            held.append(sock)
        # Those the bridge answered and closed at once were refused.
        time.sleep(1)
        for sock in held:
            sock.setblocking(False)
            try:
                data = sock.recv(512)
            except BlockingIOError:
                with self.lock:
                    self.attack["idle connections held"] += 1
                continue
            except OSError:
                data = b""
            code = "too-many-connections-from-address" if b"too-many-connections-from-address" in data else ("closed" if not data else "other")
            with self.lock:
                self.refusals[("idle connections", 429 if b" 429 " in data else 0, code)] += 1

    def refuse(self, what, status, payload):
        with self.lock:
            self.refusals[(what, status, error_code(payload))] += 1

    # The one who must not notice.

    def other(self, port):
        def timed(method, path, token=None, body=None, expect=(200, 201, 204)):
            started = time.monotonic()
            status, payload = request(port, method, path, OTHER, token=token, body=body)
            elapsed = time.monotonic() - started
            with self.lock:
                self.other_latencies.append(elapsed)
                if status not in expect:
                    self.other_errors.append(f"{method} {path}: {status} {error_code(payload)}")
            return status, payload

        # A client as a service would be: a session for a while, requests one after another.
        token, rounds = None, 0
        while not self.stop.is_set() and rounds < 2000:
            rounds += 1
            if token is None:
                status, payload = timed("POST", "/v1/sessions", body={"username": "alice", "password": "secret"})
                if status != 201:
                    self.stop.wait(0.5)
                    continue
                token = payload["token"]
            status, payload = timed("POST", "/v1/subscriptions", token=token, body={"name": "tasks", "params": [{"round": rounds % 5}]})
            timed("GET", "/v1/collections/tasks?limit=100", token=token)
            timed("GET", "/v1/public/collections/tasks?subscribe=tasks&params=%5B%5D")
            self.stream(port, token)
            if status == 201:
                timed("DELETE", f"/v1/subscriptions/{payload['id']}", token=token)
            if rounds % 25 == 0:
                timed("DELETE", "/v1/session", token=token)
                token = None

    def stream(self, port, token):
        started = time.monotonic()
        connection = http.client.HTTPConnection(HOST, port, timeout=10, source_address=(OTHER, 0))
        try:
            connection.request("GET", "/v1/events?subscribe=typed&snapshot=true", headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})
            response = connection.getresponse()
            ok = response.status == 200
            if ok:
                while time.monotonic() - started < 10:
                    line = response.fp.readline()
                    if not line or line.startswith(b"event: snapshot"):
                        ok = bool(line)
                        break
            with self.lock:
                self.other_latencies.append(time.monotonic() - started)
                if not ok:
                    self.other_errors.append(f"stream: {response.status}")
        except (OSError, http.client.HTTPException) as error:
            with self.lock:
                self.other_errors.append(f"stream: {error}")
        finally:
            connection.close()

    def run(self):
        ddp_port, port = free_port(), free_port()
        self.start("demo-server", [self.binary, "demo-server", "--host", HOST, "--port", str(ddp_port)])
        bridge = self.start(
            "bridge",
            [
                self.binary, "serve", "--upstream", f"ws://{HOST}:{ddp_port}/websocket", "--host", HOST, "--port", str(port),
                "--public-dir", "none", "--log-level", "warning", "--public-publications", "tasks(*),typed",
                "--memory-budget", str(BUDGET), "--memory-share-per-address", "25", "--memory-share-anonymous", "10",
                "--max-connections-per-address", "64",
            ],
        )  # fmt: skip
        if not self.wait_ready(port):
            self.check("the bridge is ready", False, open(os.path.join(self.work, "bridge.log"), errors="replace").read()[-800:])
            return self.finish({})
        baseline = rss(bridge.pid)
        peak = [baseline]

        def sample():
            while not self.stop.is_set():
                peak[0] = max(peak[0], rss(bridge.pid))
                time.sleep(0.1)

        held = []
        threads = [
            threading.Thread(target=sample, daemon=True),
            threading.Thread(target=self.other, args=(port,), daemon=True),
            threading.Thread(target=self.sessions, args=(port,), daemon=True),
            threading.Thread(target=self.public_reads, args=(port,), daemon=True),
        ]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        # Sessions and public reads first, then the idle connections (which, once the address's
        # bound is reached, leave it no connection for anything else).
        for thread in threads[2:]:
            thread.join(timeout=max(1, self.seconds - (time.monotonic() - began)))
        idle = threading.Thread(target=self.idle_connections, args=(port, held), daemon=True)
        idle.start()
        idle.join(timeout=max(5, self.seconds - (time.monotonic() - began)))
        self.stop.set()
        for thread in threads + [idle]:
            thread.join(timeout=25)
        elapsed = time.monotonic() - began
        peak[0] = max(peak[0], rss(bridge.pid))
        healthy = request(port, "GET", "/healthz", OTHER, timeout=5)[0] == 200
        for sock in held:
            sock.close()

        latencies = sorted(self.other_latencies)
        def quantile(q):
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0
        refusals = {f"{what}: {status} {code}": count for (what, status, code), count in sorted(self.refusals.items(), key=str)}
        figures = {
            "seconds": round(elapsed, 1),
            "budget_bytes": BUDGET,
            "rss_baseline_mib": round(baseline / 2**20, 1),
            "rss_peak_mib": round(peak[0] / 2**20, 1),
            "attack": dict(self.attack),
            "refusals": refusals,
            "other_requests": len(latencies),
            "other_p50_ms": round(quantile(0.5) * 1000, 1),
            "other_p99_ms": round(quantile(0.99) * 1000, 1),
            "other_errors": self.other_errors[:10],
        }
        print(json.dumps(figures, indent=2), flush=True)
        self.check("the bridge is alive and /healthz answers 200", bridge.poll() is None and healthy)
        self.check("the other client was never refused", not self.other_errors and len(latencies) > 10, f"{len(latencies)} requests, {self.other_errors[:3]}")
        self.check(
            "resident memory stayed under baseline + budget + margin",
            peak[0] < baseline + BUDGET + MARGIN,
            f"peak {peak[0] / 2**20:.0f} MiB, baseline {baseline / 2**20:.0f} MiB, budget {BUDGET >> 20} MiB, margin {MARGIN >> 20} MiB",
        )
        self.check("the sessions' loads were refused by the memory share", any("memory-share-exhausted" in key for key in refusals), str(refusals))
        self.check("distinct public reads were refused by the address's share", any("too-many-public-subscriptions-from-address" in key for key in refusals))
        self.check("idle connections past the address's bound were refused", any("too-many-connections-from-address" in key for key in refusals))
        self.check("the campaign stayed bounded", elapsed < self.seconds + 30, f"{elapsed:.1f} s")
        return self.finish(figures)

    def finish(self, figures):
        for process in self.processes:
            try:
                os.killpg(process.pid, 15)
            except ProcessLookupError:
                pass
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
        print(f"resource campaign: {self.passed} passed, {len(self.failed)} failed", flush=True)
        return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get("DDP_BRIDGE_BIN", ".build/debug/ddp-bridge"))
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the attack may go on (default 30)")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddp-resources-") as work:
        campaign = Campaign(os.path.abspath(args.bin), work, min(max(args.seconds, 5.0), 600.0))
        try:
            figures = campaign.run()
        except KeyboardInterrupt:
            campaign.stop.set()
            campaign.finish({})
            return 130
        if campaign.failed:
            for name in ("bridge", "demo-server"):
                try:
                    print(f"--- last lines of {name}.log\n" + "".join(open(os.path.join(work, f"{name}.log"), errors="replace").readlines()[-15:]))
                except OSError:
                    pass
    if args.out and figures:
        with open(args.out, "w") as file:
            json.dump(figures, file, indent=2)
    return 1 if campaign.failed else 0


if __name__ == "__main__":
    sys.exit(main())
