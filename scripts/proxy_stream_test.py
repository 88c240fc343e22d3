#!/usr/bin/env python3
"""Event streams through the example proxy configurations, deploy/nginx.conf and
deploy/Caddyfile: events must arrive one by one, as they are sent, and never compressed. Run
through scripts/proxy-stream-test.sh (it installs nginx and Caddy when missing).

On 127.0.0.1 with free ports, in a temporary folder: `ddp-bridge demo-server`, a bridge, then
each proxy with the shipped file, only its addresses replaced (the listen address, the
upstream, nginx's log path; Caddy's site address, with its admin API off). For each:

  1. the file is accepted (`nginx -t`, `caddy validate`);
  2. a `ticker` stream (changes at 5 per second) read with curl through the proxy: each change
     arrives at its own time, spread as the ticker sends them;
  3. the same with `Accept-Encoding: gzip`: the stream is not compressed and still spread, while
     a JSON answer of 4 KiB is compressed;
  4. a request with ?token= leaves no token in the proxy's access log, /metrics is 404, and a
     stream whose client went away ends on the bridge at once;
  5. controls, the shipped file changed on purpose, each read with `curl --compressed`: nginx
     with buffering forced on (proxy_buffering on, X-Accel-Buffering ignored), with
     text/event-stream gzipped, and with both; Caddy with `encode gzip` and its default types
     in place of the file's list. Each prints what the stream did (INFO); the one with both
     must hold the events back (a check: the measure of 2 can fail).

Each check prints PASS or FAIL; the exit status is 1 if one failed. Every wait is bounded;
every process is stopped.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from front_harness import HOST, Checks, Fatal, Processes, curl_events, free_port, login, port_open, request, spread, start_bridge, start_demo_server, wait_until  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE, COUNT = 5, 10


def replaced(text, old, new, what):
    """text with `old` (a regex) replaced once; raises when the shipped file no longer has it."""
    result, n = re.subn(old, new, text, count=1, flags=re.M)
    if n != 1:
        raise Fatal(f"the example file no longer has {what} ({old!r}): update the test")
    return result


class Test:
    def __init__(self, args):
        self.args, self.work = args, args.work
        self.checks = Checks("proxy streams")
        self.procs = Processes(self.work)
        self.bin = os.path.abspath(args.bin)

    def check(self, name, ok, detail=""):
        return self.checks.check(name, ok, detail)

    def require(self, name, ok, detail=""):
        if not self.check(name, ok, detail):
            raise Fatal(name)

    def ticker(self, port):
        """A ticker stream's URL and a session of its own for it (a session subscribing again to a
        ticker with the same parameters would share the first, whose changes are over)."""
        url = f"http://{HOST}:{port}/v1/events?subscribe=ticker&params=%5B{RATE},{COUNT}%5D&collections=ticks"
        return url, login(self.bridge_port)[0]

    def bridge_streams(self):
        status, _, body = request(self.bridge_port, "GET", "/metrics")
        m = re.search(r"^ddp_bridge_sse_streams(?:\{[^}]*\})? (\S+)$", body, re.M) if status == 200 else None
        return int(float(m.group(1))) if m else None

    def client_gone(self, label, port, idle_must_close):
        """A client that goes away must take its stream on the bridge with it, while events flow
        and while the stream is idle (only heartbeats, every 15 s): else the stream holds one of
        the session's --max-streams-per-session until a write to the gone client fails."""
        for kind, query, wanted in (("with events flowing", f"subscribe=ticker&params=%5B{RATE},0%5D&collections=ticks", 3),
                                    ("idle", "subscribe=tasks&collections=tasks", 1)):
            # Counted from here, once the earlier checks' streams are gone (through nginx at once;
            # through Caddy an earlier idle one may still be held, see below).
            wait_until(lambda: self.bridge_streams() == 0, 3, 0.1)
            before = self.bridge_streams()
            url = f"http://{HOST}:{port}/v1/events?{query}"
            curl_events(url, login(self.bridge_port)[0], wanted, 1.5)  # curl is stopped when it returns
            closed_at = time.monotonic()
            gone = wait_until(lambda: self.bridge_streams() <= before, 5, 0.1)
            detail = (f"ddp_bridge_sse_streams back to {before} after {time.monotonic() - closed_at:.1f} s" if gone
                      else f"ddp_bridge_sse_streams {self.bridge_streams()} 5 s later, {before} before it opened")
            name = f"{label}: the client gone, a stream {kind} ends on the bridge at once"
            if kind == "idle" and not idle_must_close:
                print(f"INFO {name}: {'yes' if gone else 'no'} — {detail} (known for this proxy: see docs/OPERATIONS.md)", flush=True)
            else:
                self.check(name, bool(gone), detail)

    def stream_checks(self, label, port, log_file, idle_must_close=True):
        token = self.token
        events, head = curl_events(*self.ticker(port), COUNT, COUNT / RATE + 6)
        ok, text = spread(events, RATE, COUNT)
        self.check(f"{label}: each event of a ticker stream ({RATE}/s) arrives on its own", ok, text)
        self.client_gone(label, port, idle_must_close)
        events, head = curl_events(*self.ticker(port), COUNT, COUNT / RATE + 6, ["-H", "accept-encoding: gzip"])
        encoding = re.findall(r"(?im)^content-encoding:\s*(\S+)", head)
        ok, text = spread(events, RATE, COUNT)
        self.check(f"{label}: with Accept-Encoding: gzip the stream is not compressed and still arrives event by event",
                   not encoding and ok, f"Content-Encoding {encoding or 'none'}; {text}")
        status, headers, _ = request(port, "POST", "/v1/methods/echo", ["x" * 4096],
                                     headers={"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip"})
        self.check(f"{label}: a JSON answer of 4 KiB is compressed", status == 200 and headers.get("content-encoding") == ["gzip"],
                   f"status {status}, Content-Encoding {headers.get('content-encoding')}")
        status, _, _ = request(port, "GET", "/metrics")
        self.check(f"{label}: /metrics is not served through the proxy", status == 404, f"GET /metrics: {status}")
        secret = "ddpb_not-a-real-token-but-logged-if-queries-are"
        request(port, "GET", f"/v1/session?token={secret}")
        logged = wait_until(lambda: os.path.exists(log_file) and "/v1/session" in open(log_file, errors="replace").read(), 5, 0.1)
        text = open(log_file, errors="replace").read() if os.path.exists(log_file) else ""
        self.check(f"{label}: the access log has the request without its ?token=", bool(logged) and secret not in text,
                   next((f"logged: {m.group(0)}" for m in re.finditer(r"/v1/session[^\"\s]*", text)), "no line for /v1/session"))

    def control(self, label, port, what):
        # --compressed: curl asks for gzip and decodes it, so compressed events are counted too.
        events, head = curl_events(*self.ticker(port), COUNT, COUNT / RATE + 4, ["--compressed"])
        encoding = re.findall(r"(?im)^content-encoding:\s*(\S+)", head)
        ok, text = spread(events, RATE, COUNT)
        line = f"control, {label} with {what}: the stream {'still arrives event by event' if ok else 'does not arrive event by event'}"
        answered = re.match(r"HTTP/\S+ \d+", head.strip())
        detail = (f"Content-Encoding {encoding or 'none'}" if answered else f"no response head within {COUNT / RATE + 4:.0f} s") + f"; {text}"
        return ok, line, detail

    # --- nginx --------------------------------------------------------------------------
    def nginx_conf(self, port, log_file, buffered=False):
        text = open(os.path.join(REPO, "deploy", "nginx.conf")).read()
        text = replaced(text, r"^(\s*)listen 80;", rf"\1listen {HOST}:{port};", "listen 80")
        text = replaced(text, r"^(\s*)server 127\.0\.0\.1:8080;", rf"\1server {HOST}:{self.bridge_port};", "the upstream server")
        text = replaced(text, r"^(\s*)access_log \S+ ddp_bridge;", rf"\1access_log {log_file} ddp_bridge;", "the access log")
        if buffered in ("gzip", "both"):
            text = replaced(text, r"^(\s*)gzip_types ", r"\1gzip_types text/event-stream ", "gzip_types")
            text = replaced(text, r"^(\s*)gzip off;\n", "", "gzip off")
        if buffered in (True, "both"):
            text = replaced(text, r"^(\s*)proxy_buffering off;", r"\1proxy_buffering on;\n\1proxy_ignore_headers X-Accel-Buffering;", "proxy_buffering off")
        return text

    def start_nginx(self, name, text):
        folder = os.path.join(self.work, name)
        os.makedirs(folder)
        conf = os.path.join(folder, "nginx.conf")
        with open(conf, "w") as file:
            file.write(text)
        globals_ = f"daemon off; pid {folder}/nginx.pid;" + (" user root;" if os.geteuid() == 0 else "")
        argv = ["nginx", "-p", folder + "/", "-c", conf, "-e", os.path.join(folder, "error.log"), "-g", globals_]
        tested = subprocess.run(argv[:-2] + ["-g", globals_, "-t"], capture_output=True, text=True, timeout=20)
        self.require(f"{name}: nginx -t accepts it", tested.returncode == 0, (tested.stdout + tested.stderr).strip().splitlines()[-1] if tested.returncode == 0 else tested.stderr[-400:])
        self.procs.start(name, argv)
        port = int(re.search(r"listen \S+:(\d+);", text).group(1))
        self.require(f"{name} listens", bool(wait_until(lambda: port_open(port), 10)), f"{HOST}:{port}" if port_open(port) else self.procs.log(name))

    def nginx(self):
        version = subprocess.run(["nginx", "-v"], capture_output=True, text=True, timeout=10).stderr.strip()
        print(f"---- nginx: {version}", flush=True)
        port, log_file = free_port(), os.path.join(self.work, "nginx-access.log")
        self.start_nginx("nginx", self.nginx_conf(port, log_file))
        self.stream_checks("nginx (deploy/nginx.conf)", port, log_file)
        self.procs.stop("nginx")
        port = free_port()
        self.start_nginx("nginx-buffered", self.nginx_conf(port, os.path.join(self.work, "nginx-buffered-access.log"), buffered=True))
        ok, line, detail = self.control("nginx", port, "proxy_buffering on and X-Accel-Buffering ignored")
        print(f"INFO {line} — {detail}", flush=True)
        self.procs.stop("nginx-buffered")
        port = free_port()
        self.start_nginx("nginx-gzip", self.nginx_conf(port, os.path.join(self.work, "nginx-gzip-access.log"), buffered="gzip"))
        ok, line, detail = self.control("nginx", port, "text/event-stream in gzip_types")
        print(f"INFO {line} — {detail}", flush=True)
        self.procs.stop("nginx-gzip")
        port = free_port()
        self.start_nginx("nginx-both", self.nginx_conf(port, os.path.join(self.work, "nginx-both-access.log"), buffered="both"))
        ok, line, detail = self.control("nginx", port, "both: buffering on, X-Accel-Buffering ignored, text/event-stream gzipped")
        self.check(line, not ok, detail)
        self.procs.stop("nginx-both")

    # --- Caddy --------------------------------------------------------------------------
    def caddyfile(self, port, plain_encode=False):
        text = open(os.path.join(REPO, "deploy", "Caddyfile")).read()
        text = replaced(text, r"^bridge\.example\.com \{", f"http://{HOST}:{port} {{\n\tbind {HOST}", "the site address")
        text = replaced(text, r"^(\s*)reverse_proxy 127\.0\.0\.1:8080 \{", rf"\1reverse_proxy {HOST}:{self.bridge_port} {{", "the upstream")
        if plain_encode:
            text = replaced(text, r"^\tencode \{\n(?:\t\t.*\n)*?\t\}\n", "\tencode gzip\n", "the encode block")
        return "{\n\tadmin off\n}\n\n" + text

    def start_caddy(self, name, text):
        folder = os.path.join(self.work, name)
        os.makedirs(folder)
        path = os.path.join(folder, "Caddyfile")
        with open(path, "w") as file:
            file.write(text)
        env = dict(os.environ, HOME=folder, XDG_DATA_HOME=folder, XDG_CONFIG_HOME=folder)
        validated = subprocess.run(["caddy", "validate", "--config", path, "--adapter", "caddyfile"], capture_output=True, text=True, timeout=30, env=env)
        self.require(f"{name}: caddy validate accepts it", validated.returncode == 0, "Valid configuration" if validated.returncode == 0 else validated.stderr[-400:])
        self.procs.start(name, ["caddy", "run", "--config", path, "--adapter", "caddyfile"], env=env)
        port = int(re.search(rf"http://{re.escape(HOST)}:(\d+)", text).group(1))
        self.require(f"{name} listens", bool(wait_until(lambda: port_open(port), 15)), f"{HOST}:{port}" if port_open(port) else self.procs.log(name))
        return os.path.join(self.work, f"{name}.log")

    def caddy(self):
        version = subprocess.run(["caddy", "version"], capture_output=True, text=True, timeout=10).stdout.strip()
        print(f"---- caddy: {version}", flush=True)
        port = free_port()
        log_file = self.start_caddy("caddy", self.caddyfile(port))
        # Caddy 2.6 ends a stream whose client went away when a write to it fails: at once while
        # events flow, but an idle stream's heartbeats took 55 s to get there when measured.
        self.stream_checks("Caddy (deploy/Caddyfile)", port, log_file, idle_must_close=False)
        self.procs.stop("caddy")
        port = free_port()
        self.start_caddy("caddy-encode-all", self.caddyfile(port, plain_encode=True))
        ok, line, detail = self.control("Caddy", port, "`encode gzip` (Caddy's default types) in place of the file's list")
        print(f"INFO {line} — {detail}", flush=True)
        self.procs.stop("caddy-encode-all")

    def run(self):
        started = time.monotonic()
        try:
            ddp_port = start_demo_server(self.procs, self.bin, self.checks)
            self.bridge_port = start_bridge(self.procs, self.bin, self.checks, "bridge", ddp_port, ["--public-dir", "none"])
            self.token, _ = login(self.bridge_port)
            if "nginx" in self.args.only:
                self.nginx()
            if "caddy" in self.args.only:
                self.caddy()
        except Fatal as error:
            print(f"proxy streams: stopped after a failed step: {error}", flush=True)
            if not self.checks.failed:
                self.checks.failed.append(str(error))
        except Exception:  # noqa: BLE001 — reported, then cleaned up
            self.check("no unexpected error", False, traceback.format_exc().strip().splitlines()[-1])
            traceback.print_exc()
        finally:
            if self.checks.failed:
                for name in list(self.procs.children):
                    tail = self.procs.log(name, 8)
                    if tail:
                        print(f"--- last lines of {name}.log\n{tail}", end="" if tail.endswith("\n") else "\n")
            self.procs.stop_all()
        return self.checks.summary(started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--bin", default=os.environ.get("DDP_BRIDGE_BIN", os.path.join(REPO, ".build/debug/ddp-bridge")))
    parser.add_argument("--only", default="nginx,caddy", help="nginx, caddy or both (comma-separated)")
    args = parser.parse_args()
    args.only = args.only.split(",")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(Test(args).run())


if __name__ == "__main__":
    main()
