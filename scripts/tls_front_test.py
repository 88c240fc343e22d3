#!/usr/bin/env python3
"""The TLS and HTTP/2 front (deploy/haproxy.cfg + deploy/haproxy-tls.cfg) in front of two bridge
replicas, with a browser. Run through scripts/tls-front-test.sh (it installs what is missing).

On 127.0.0.1 with free ports, in a temporary folder: a self-signed certificate made here
(openssl), `ddp-bridge demo-server`, two bridges (`serve --trusted-proxies 127.0.0.1
--public-origin <both fronts>`) serving a test page from a folder of their own, and HAProxy with
both files: the TLS frontend and the plain HTTP one share the backend (stickiness, checks). Then:

  1. `haproxy -c` accepts the two files, also with the redirect to https and HSTS switched on;
  2. curl: the TLS front speaks HTTP/2 (ALPN h2); a login through it sets the cookie with
     `Secure` (HAProxy says X-Forwarded-Proto: https), through the plain front without;
  3. `curl --http2 -k` follows a `ticker` stream through the TLS front: each event arrives on its
     own, spread as the ticker sends them (not held and delivered in one piece);
  4. headless Chromium (Selenium; the self-signed certificate accepted by a flag) opens the page
     over https, logs in (cookie) and opens 10 EventSource streams from it: all 10 open over one
     HTTP/2 connection, all on the replica that holds the session; then the page writes a
     change (a cookie write from the public origin) and every stream receives it;
  5. the baseline: the same page over plain HTTP/1.1 opens 10 streams and only 6 open (the
     browser's six connections per host); the 7th opens when one of the six is closed.

Each check prints PASS or FAIL; the exit status is 1 if any failed. Every wait is bounded; every
process started here is stopped at the end.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from front_harness import HOST, Checks, Fatal, Processes, curl_events, free_ports, login, port_open, request, spread, start_bridge, start_demo_server, wait_until  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STREAMS = 10
TICKER_RATE, TICKER_COUNT = 5, 10

# The test page: served by the bridges (--public-dir), so it has the fronts' origins. Selenium
# drives it through window.streamsTest.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>ten streams</title></head>
<body><p>EventSource streams through the front; driven by scripts/tls_front_test.py.</p>
<script src="streams.js"></script></body></html>
"""

# In a file of its own: the bridge's Content-Security-Policy allows scripts from 'self' only.
SCRIPT = """window.streamsTest = {
  streams: [],
  token: null,
  async login() {
    const r = await fetch('/v1/sessions', {method: 'POST', credentials: 'same-origin',
      headers: {'content-type': 'application/json'}, body: JSON.stringify({username: 'alice', password: 'secret'})});
    const body = await r.json();
    this.token = body.token || null;
    return r.status;
  },
  open(n, withToken) {
    for (let i = 0; i < n; i++) {
      // snapshot=true: each stream starts with the tasks and a `snapshot` marker. (Without it, a
      // stream that joins the session's subscription after it is ready gets no event at first.)
      const query = 'subscribe=tasks&collections=tasks&snapshot=true' + (withToken ? '&token=' + encodeURIComponent(this.token) : '');
      const es = new EventSource('/v1/events?' + query);
      const s = {es, created: performance.now(), opened: null, ready: null, changes: [], errors: 0};
      es.onopen = () => { if (s.opened === null) s.opened = performance.now(); };
      es.onerror = () => { s.errors++; };
      es.addEventListener('snapshot', () => { if (s.ready === null) s.ready = performance.now(); });
      es.addEventListener('changed', (e) => {
        const d = JSON.parse(e.data);
        s.changes.push({at: performance.now(), id: d.id, text: d.fields ? d.fields.text : undefined});
      });
      this.streams.push(s);
    }
  },
  status() {
    return this.streams.map((s, i) => ({i, readyState: s.es.readyState, created: s.created, opened: s.opened, ready: s.ready,
      errors: s.errors, changes: s.changes}));
  },
  async write(id, text) {
    const at = performance.now();
    const r = await fetch('/v1/collections/tasks/' + id, {method: 'PATCH', credentials: 'same-origin',
      headers: {'content-type': 'application/json'}, body: JSON.stringify({text})});
    return {status: r.status, at, body: await r.text()};
  },
  close(i) { this.streams[i].es.close(); },
  closeAll() { this.streams.forEach((s) => s.es.close()); },
  protocols() {
    const nav = performance.getEntriesByType('navigation')[0];
    const login = performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/v1/sessions'))[0];
    return {page: nav ? nav.nextHopProtocol : null, login: login ? login.nextHopProtocol : null};
  },
};
"""


def established_to(port):
    """TCP connections established to 127.0.0.1:port, counted at the client's end (the browser's)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"], capture_output=True, text=True, timeout=10).stdout
    return len([line for line in out.splitlines() if line.strip()])


def sse_streams(port):
    """ddp_bridge_sse_streams of the bridge at port (None when not scraped)."""
    status, _, body = request(port, "GET", "/metrics")
    m = re.search(r"^ddp_bridge_sse_streams(?:\{[^}]*\})? (\S+)$", body, re.M) if status == 200 else None
    return int(float(m.group(1))) if m else None


class Test:
    def __init__(self, args):
        self.args, self.work = args, args.work
        self.checks = Checks("tls front")
        self.procs = Processes(self.work)
        self.bin = os.path.abspath(args.bin)
        self.driver = None

    def check(self, name, ok, detail=""):
        return self.checks.check(name, ok, detail)

    def require(self, name, ok, detail=""):
        if not self.check(name, ok, detail):
            raise Fatal(name)

    # --- set-up -------------------------------------------------------------------------
    def certificate(self):
        key, cert = os.path.join(self.work, "key.pem"), os.path.join(self.work, "cert.pem")
        made = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            capture_output=True, text=True, timeout=30)  # fmt: skip
        self.pem = os.path.join(self.work, "site.pem")
        if made.returncode == 0:
            with open(self.pem, "w") as out:
                out.write(open(cert).read() + open(key).read())
            os.chmod(self.pem, 0o600)
        self.require("a self-signed certificate for 127.0.0.1 (openssl, EC P-256)", made.returncode == 0, "" if made.returncode == 0 else made.stderr[-300:])

    def haproxy_env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HAPROXY_", "BRIDGE_"))}
        env.update(
            BRIDGE_A=f"{HOST}:{self.bridges['bridge-a']}", BRIDGE_B=f"{HOST}:{self.bridges['bridge-b']}",
            HAPROXY_BIND=f"{HOST}:{self.plain_port}", HAPROXY_TLS_BIND=f"{HOST}:{self.tls_port}", HAPROXY_TLS_CERT=self.pem,
            HAPROXY_STATS_SOCKET=os.path.join(self.work, "haproxy.sock"), HAPROXY_NAMESERVER=f"{HOST}:53", **extra)  # fmt: skip
        return env

    def start(self):
        self.certificate()
        public = os.path.join(self.work, "public")
        os.makedirs(public)
        for name, text in (("streams.html", PAGE), ("streams.js", SCRIPT)):
            with open(os.path.join(public, name), "w") as file:
                file.write(text)
        ddp_port = start_demo_server(self.procs, self.bin, self.checks)
        self.plain_port, self.tls_port = free_ports(2)
        origins = f"https://{HOST}:{self.tls_port},http://{HOST}:{self.plain_port}"
        self.bridges = {}
        for name in ("bridge-a", "bridge-b"):
            self.bridges[name] = start_bridge(self.procs, self.bin, self.checks, name, ddp_port,
                                              ["--public-dir", public, "--public-origin", origins])
        files = ["-f", os.path.join(REPO, "deploy", "haproxy.cfg"), "-f", os.path.join(REPO, "deploy", "haproxy-tls.cfg")]
        for label, extra in (("as they are", {}), ("with HAPROXY_REDIRECT_HTTPS and HAPROXY_HSTS_MAX_AGE", {"HAPROXY_REDIRECT_HTTPS": "1", "HAPROXY_HSTS_MAX_AGE": "600"})):
            checked = subprocess.run(["haproxy", "-c", "-q", *files], capture_output=True, text=True, timeout=20, env=self.haproxy_env(**extra))
            self.require(f"haproxy -c accepts haproxy.cfg + haproxy-tls.cfg {label}", checked.returncode == 0, (checked.stdout + checked.stderr)[-400:])
        self.procs.start("haproxy", ["haproxy", "-db", *files], env=self.haproxy_env())
        up = wait_until(lambda: port_open(self.tls_port) and port_open(self.plain_port) and all(
            request(self.plain_port, "GET", "/readyz", timeout=2)[0] == 200 for _ in range(2)), 15, 0.2)
        self.require("HAProxy listens: TLS front and plain front", bool(up),
                     f"https://{HOST}:{self.tls_port}, http://{HOST}:{self.plain_port}" if up else self.procs.log("haproxy"))

    # --- curl ---------------------------------------------------------------------------
    def curl_checks(self):
        done = subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", f"https://{HOST}:{self.tls_port}/readyz"],
                              capture_output=True, text=True, timeout=20)  # fmt: skip
        self.check("curl --http2 -k: the TLS front answers over HTTP/2 (ALPN h2)", done.stdout.strip() == "2 200", f"HTTP version and status: {done.stdout.strip()!r}")
        done = subprocess.run(["curl", "-sk", "--http1.1", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", f"https://{HOST}:{self.tls_port}/readyz"],
                              capture_output=True, text=True, timeout=20)  # fmt: skip
        self.check("curl --http1.1 -k: the TLS front still speaks HTTP/1.1 (ALPN http/1.1)", done.stdout.strip() == "1.1 200", f"{done.stdout.strip()!r}")
        _, headers = login(self.tls_port, tls=True)
        cookie = next((c for c in headers.get("set-cookie", []) if c.startswith("ddp_bridge_session=")), "")
        self.check("a login through the TLS front sets the session cookie with Secure (X-Forwarded-Proto: https)",
                   "; Secure" in cookie, re.sub(r"=ddpb_[^;]+", "=…", cookie))
        _, headers = login(self.plain_port)
        cookie = next((c for c in headers.get("set-cookie", []) if c.startswith("ddp_bridge_session=")), "")
        self.check("a login through the plain front sets it without Secure", cookie and "Secure" not in cookie, re.sub(r"=ddpb_[^;]+", "=…", cookie))
        # A client's own X-Forwarded-Proto counts for nothing on the plain front.
        status, headers, _ = request(self.plain_port, "POST", "/v1/sessions", {"username": "alice", "password": "secret"}, headers={"X-Forwarded-Proto": "https"})
        cookie = next((c for c in headers.get("set-cookie", []) if c.startswith("ddp_bridge_session=")), "")
        self.check("a client's own X-Forwarded-Proto: https on the plain front is overwritten (no Secure)", status == 201 and "Secure" not in cookie, re.sub(r"=ddpb_[^;]+", "=…", cookie))

        fronts = [request(self.tls_port, "GET", "/metrics", tls=True)[0], request(self.plain_port, "GET", "/metrics")[0]]
        self.check("/metrics is not served through either front (Prometheus scrapes the replicas)", fronts == [404, 404], f"GET /metrics: TLS {fronts[0]}, plain {fronts[1]}")

        token, _ = login(self.tls_port, tls=True)
        url = f"https://{HOST}:{self.tls_port}/v1/events?subscribe=ticker&params=%5B{TICKER_RATE},{TICKER_COUNT}%5D&collections=ticks"
        events, head = curl_events(url, token, TICKER_COUNT, TICKER_COUNT / TICKER_RATE + 8, ["--http2", "-k"])
        status_line = head.splitlines()[0].strip() if head else ""
        self.check("curl --http2 -k -N follows a ticker stream through the TLS front over HTTP/2", status_line == "HTTP/2 200", status_line or head[-200:])
        ok, text = spread(events, TICKER_RATE, TICKER_COUNT)
        self.check(f"through the TLS front each event arrives on its own, as the ticker sends them ({TICKER_RATE}/s)", ok, text)

    # --- the browser --------------------------------------------------------------------
    def browser(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        # --ignore-certificate-errors: the certificate is self-signed (made by this test).
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                         "--disable-extensions", "--ignore-certificate-errors", "--window-size=800,600"]:
            options.add_argument(argument)
        options.accept_insecure_certs = True
        # chromedriver (and the Chromium it starts) in a process group of its own, recorded like
        # the others, so the shell script can kill what a killed driver would leave.
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"), popen_kw={"start_new_session": True})
        self.driver = webdriver.Chrome(service=service, options=options)
        with open(os.path.join(self.work, "pids"), "a") as file:
            file.write(f"{service.process.pid}\n")
        self.driver.set_script_timeout(20)
        self.driver.set_page_load_timeout(20)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def js_async(self, call):
        return self.driver.execute_async_script(
            f"const done = arguments[arguments.length - 1]; Promise.resolve({call}).then(done, (e) => done('error: ' + e));")

    def statuses(self):
        return self.js("return window.streamsTest.status();")

    def h2_streams_logged(self):
        return len(re.findall(r" ddp-bridge-tls~ .* GET /v1/events HTTP/2\.0$", self.procs.log("haproxy", 1000), re.M))

    def over_h2(self):
        self.driver.get(f"https://{HOST}:{self.tls_port}/streams.html")
        status = self.js_async("window.streamsTest.login()")
        self.require("Chromium opens the page over https and logs in (the cookie, from the page's origin)", status == 201, f"POST /v1/sessions: {status}")
        self.streams_before = {name: sse_streams(port) for name, port in self.bridges.items()}
        logged_before = self.h2_streams_logged()
        self.js("window.streamsTest.open(arguments[0], false);", STREAMS)
        all_ready = wait_until(lambda: (lambda s: len(s) == STREAMS and all(x["ready"] is not None for x in s) and s)(self.statuses()), 15, 0.1)
        states = self.statuses()
        opened = sum(1 for s in states if s["opened"] is not None)
        ready = [s["ready"] - s["created"] for s in states if s["ready"] is not None]
        self.check(f"over HTTP/2: all {STREAMS} EventSource streams of one page open and get their snapshot",
                   bool(all_ready), f"{opened} opened, {len(ready)} with their snapshot, the last {max(ready, default=0):.0f} ms after the "
                   f"page opened them; readyState {[s['readyState'] for s in states]}")  # fmt: skip
        protocols = self.js("return window.streamsTest.protocols();")
        connections = established_to(self.tls_port)
        # One connection carries the page's requests and streams; Chromium may hold a second
        # (it keeps credentialed and uncredentialed requests in separate pools: seen once).
        self.check(f"the page and its requests went over h2, the {STREAMS} streams on at most two connections to the front",
                   protocols.get("page") == "h2" and protocols.get("login") == "h2" and 1 <= connections <= 2,
                   f"nextHopProtocol {protocols}; the browser's connections to the TLS port: {connections}")
        per_replica = {name: sse_streams(port) - self.streams_before[name] for name, port in self.bridges.items()}
        self.check(f"all {STREAMS} streams are on the replica holding the session (stickiness through the TLS front)",
                   sorted(per_replica.values()) == [0, STREAMS], f"ddp_bridge_sse_streams grew by {per_replica}")
        text = f"h2-{uuid.uuid4().hex[:8]}"
        wrote = self.js_async(f"window.streamsTest.write('task-a1', {json.dumps(text)})")
        self.check("the page writes a change after all are open (PATCH with the cookie, Origin = the public origin)",
                   isinstance(wrote, dict) and wrote.get("status") == 200,
                   f"PATCH /v1/collections/tasks/task-a1: {wrote.get('status')} {wrote.get('body')}" if isinstance(wrote, dict) else f"{wrote}")
        got = wait_until(lambda: (lambda s: all(any(c["text"] == text for c in x["changes"]) for x in s) and s)(self.statuses()), 10, 0.1)
        states = self.statuses()
        delays = [min((c["at"] - wrote["at"] for c in s["changes"] if c["text"] == text), default=None) for s in states] if isinstance(wrote, dict) else []
        received = [d for d in delays if d is not None]
        self.check(f"each of the {STREAMS} streams receives that change",
                   bool(got) and len(received) == STREAMS,
                   f"{len(received)} of {STREAMS}, within {min(received):.0f}–{max(received):.0f} ms of the write" if received else f"none: {states[:2]}")
        closed_at = time.monotonic()
        self.js("window.streamsTest.closeAll();")
        # option abortonclose: the streams the browser closed end on the bridge at once, not at
        # the bridge's next write to them (the heartbeat, 15 s).
        gone = wait_until(lambda: all(sse_streams(port) == 0 for port in self.bridges.values()), 5, 0.1)
        self.check("the browser closes them: they end on the bridge at once (option abortonclose)", bool(gone),
                   f"ddp_bridge_sse_streams 0 on both replicas {time.monotonic() - closed_at:.1f} s later" if gone
                   else f"still {[sse_streams(port) for port in self.bridges.values()]} after 5 s")
        # HAProxy logs a request when it ends: the ten streams, each as HTTP/2.0 on the TLS frontend.
        logged = wait_until(lambda: (lambda n: n >= STREAMS and n)(self.h2_streams_logged() - logged_before), 10, 0.2)
        self.check("HAProxy's log: the streams came in over HTTP/2 on the TLS frontend", bool(logged),
                   f"{logged or 0} lines 'ddp-bridge-tls~ … GET /v1/events HTTP/2.0' for the page's streams")

    def over_h1(self):
        self.driver.get(f"http://{HOST}:{self.plain_port}/streams.html")
        status = self.js_async("window.streamsTest.login()")
        self.require("the page over plain HTTP/1.1 logs in", status == 201, f"POST /v1/sessions: {status}")
        self.js("window.streamsTest.open(arguments[0], true);", STREAMS)
        six = wait_until(lambda: (lambda s: sum(1 for x in s if x["opened"] is not None) >= 6 and s)(self.statuses()), 15, 0.1)
        time.sleep(3)  # the others wait for a connection; give them time to show they do not open
        states = self.statuses()
        opened = [s["i"] for s in states if s["opened"] is not None]
        waiting = [s["i"] for s in states if s["opened"] is None and s["readyState"] == 0]
        connections = established_to(self.plain_port)
        self.check(f"over HTTP/1.1: of {STREAMS} streams only 6 open, the 7th does not (six connections per host)",
                   bool(six) and len(opened) == 6 and len(waiting) == STREAMS - 6,
                   f"open: streams {opened}; still connecting (readyState 0) after 3 s more: {waiting}; "
                   f"the browser's connections to the plain port: {connections}")  # fmt: skip
        if opened:
            self.js("window.streamsTest.close(arguments[0]);", opened[0])
            seventh = wait_until(lambda: (lambda s: sum(1 for x in s if x["opened"] is not None) >= 7 and s)(self.statuses()), 10, 0.1)
            newly = [s["i"] for s in (seventh or self.statuses()) if s["opened"] is not None and s["i"] not in opened]
            self.check("closing one of the six lets a waiting stream open", bool(seventh), f"stream {opened[0]} closed; then opened: {newly}")
        self.js("window.streamsTest.closeAll();")

    def run(self):
        started = time.monotonic()
        try:
            self.start()
            self.curl_checks()
            self.browser()
            self.over_h2()
            self.over_h1()
        except Fatal as error:
            print(f"tls front: stopped after a failed step: {error}", flush=True)
        except Exception:  # noqa: BLE001 — reported, then cleaned up
            self.check("no unexpected error", False, traceback.format_exc().strip().splitlines()[-1])
            traceback.print_exc()
        finally:
            if self.driver is not None:
                try:
                    self.driver.quit()
                except Exception:  # noqa: BLE001
                    pass
            if self.checks.failed:
                for name in ("haproxy", "bridge-a", "bridge-b", "demo-server"):
                    tail = self.procs.log(name, 10)
                    if tail:
                        print(f"--- last lines of {name}.log\n{tail}", end="" if tail.endswith("\n") else "\n")
            self.procs.stop_all()
        return self.checks.summary(started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="a folder for the certificate, the page and the logs")
    parser.add_argument("--bin", default=os.environ.get("DDP_BRIDGE_BIN", os.path.join(REPO, ".build/debug/ddp-bridge")))
    args = parser.parse_args()
    # SIGTERM (from timeout or the shell's trap) ends the test as Ctrl-C does: through the cleanup.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(Test(args).run())


if __name__ == "__main__":
    main()
