#!/usr/bin/env python3
"""The Grafana dashboard and the Prometheus alert rules name only metrics the bridge exports.

1. `promtool check rules` on deploy/prometheus/ddp-bridge-rules.yml, `promtool test rules` on a
   few alert unit tests written here, and the dashboard's queries (Grafana variables filled in)
   parsed by promtool as recording rules. Without promtool these print SKIP and do not fail
   (install it with `apt-get install prometheus`).
2. Every `ddp_bridge_*` name in the dashboard's queries and the rules' exprs is collected
   (`_bucket`/`_sum`/`_count` taken back to the histogram they belong to).
3. The bridge binary (DDP_BRIDGE_BIN, default .build/debug/ddp-bridge) runs as
   `demo --port <free port> --metrics-port <another> --public-dir none` (the deploy files' way:
   /metrics only on the metrics port, 404 on the API's), with a session key and a data folder it cannot
   use (so the store fails once and its error counter appears) and a small per-address
   connection limit (so one connection is refused and that counter appears): counters with
   labels appear only once counted. Some traffic is made, /metrics is scraped, and each name
   from step 2 must be exported there.
4. Debian's Prometheus (`prometheus`, when installed; SKIP otherwise) runs on loopback with the
   shipped deploy/prometheus/prometheus.yml, only its target replaced by that bridge's metrics address
   (the rules file copied beside it, as the compose profile mounts it), while a thread keeps
   making traffic: the target must be up, the 20 alert rules loaded, and every query of every
   dashboard panel (Grafana's variables filled in as Grafana would: the job, every instance,
   $__rate_interval 1m) must return data through the HTTP API (/api/v1/query). `promtool check
   config` checks the file first.

Loopback only; every wait is bounded; the bridge is stopped at the end. Standard library only.
Ends with `observability: N passed, M failed`; exits 1 on any failure.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "ddp-bridge.json")
RULES = os.path.join(ROOT, "deploy", "prometheus", "ddp-bridge-rules.yml")
PROMETHEUS_CONFIG = os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")
# Grafana's $__rate_interval with the shipped 15 s scrape interval: max(4 × 15 s, 15 s + 15 s).
RATE_INTERVAL = "1m"
BIN = os.path.abspath(os.environ.get("DDP_BRIDGE_BIN", os.path.join(ROOT, ".build", "debug", "ddp-bridge")))
PER_ADDRESS = 4  # --max-connections-per-address for the run: small enough to reach on purpose

passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail else ""), flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


def skip(name, reason):
    print(f"SKIP {name} — {reason}", flush=True)


# --- 1. promtool -------------------------------------------------------------------------------

def run_promtool(args, timeout=60):
    try:
        done = subprocess.run(["promtool"] + args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"promtool {' '.join(args[:2])} still running after {timeout} s"
    return done.returncode, (done.stdout + done.stderr).strip()


# Alert unit tests: the session-store rule stays quiet on a bridge without a store (the gauge is
# 0 there too) and fires on one whose store failed; readiness and the memory budget fire.
UNIT_TESTS = """\
rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'ddp_bridge_session_store_up{{instance="memory-only:8080", job="ddp-bridge"}}'
        values: '0x10'
      - series: 'ddp_bridge_session_store_up{{instance="broken-store:8080", job="ddp-bridge"}}'
        values: '0x10'
      - series: 'ddp_bridge_session_store_errors_total{{instance="broken-store:8080", job="ddp-bridge", operation="open"}}'
        values: '1+1x10'
      - series: 'ddp_bridge_upstream_ready{{instance="broken-store:8080", job="ddp-bridge"}}'
        values: '1 1 0x8'
      - series: 'ddp_bridge_memory_budget_used_bytes{{instance="broken-store:8080", job="ddp-bridge"}}'
        values: '95x10'
      - series: 'ddp_bridge_memory_budget_bytes{{instance="broken-store:8080", job="ddp-bridge"}}'
        values: '100x10'
    # ALERTS series rather than alert_rule_test, which would repeat every annotation here.
    promql_expr_test:
      - expr: ALERTS{{alertname="DDPBridgeSessionStoreDown", alertstate="firing"}}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{{alertname="DDPBridgeSessionStoreDown", alertstate="firing", severity="critical", instance="broken-store:8080", job="ddp-bridge"}}'
            value: 1
      - expr: ALERTS{{alertname="DDPBridgeUpstreamNotReady", alertstate="firing"}}
        eval_time: 6m
        exp_samples:
          - labels: 'ALERTS{{alertname="DDPBridgeUpstreamNotReady", alertstate="firing", severity="critical", instance="broken-store:8080", job="ddp-bridge"}}'
            value: 1
      - expr: ALERTS{{alertname="DDPBridgeUpstreamNotReady", alertstate="firing"}}
        eval_time: 4m
        exp_samples: []
      - expr: ALERTS{{alertname="DDPBridgeMemoryBudgetNearlyFull", alertstate="firing"}}
        eval_time: 10m
        exp_samples:
          - labels: 'ALERTS{{alertname="DDPBridgeMemoryBudgetNearlyFull", alertstate="firing", severity="warning", instance="broken-store:8080", job="ddp-bridge"}}'
            value: 1
"""


def dashboard_exprs(dashboard):
    exprs = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    exprs.append((panel.get("title", "?"), target["expr"]))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    return exprs


def rule_exprs(text):
    """The `expr:` values of the rules file, plain or as a `|` block (no YAML library needed)."""
    exprs, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        indent, value = len(m.group(1)), m.group(2).strip()
        if value in ("|", "|-", ">", ">-"):
            block = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            value = " ".join(block)
        exprs.append(value.strip("'\""))
    return exprs


def grafana_to_promql(expr):
    """Fills in the dashboard's variables so promtool can parse the query."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", ".+", expr)


def check_promtool(dashboard):
    if shutil.which("promtool") is None:
        reason = "promtool is not installed (apt-get install prometheus)"
        skip("promtool check rules", reason)
        skip("promtool test rules", reason)
        skip("dashboard queries parse", reason)
        return
    code, out = run_promtool(["check", "config", PROMETHEUS_CONFIG])
    check("promtool check config deploy/prometheus/prometheus.yml (with its rule file)", code == 0,
          " ".join(line.strip() for line in out.splitlines() if "SUCCESS" in line) if code == 0 else out[-400:])
    code, out = run_promtool(["check", "rules", RULES])
    check("promtool check rules deploy/prometheus/ddp-bridge-rules.yml", code == 0, out.splitlines()[-1] if out else "")
    if code != 0:
        print(out)
    with tempfile.TemporaryDirectory(prefix="check-observability-") as folder:
        tests = os.path.join(folder, "tests.yml")
        with open(tests, "w") as f:
            f.write(UNIT_TESTS.format(rules=json.dumps(RULES)))
        code, out = run_promtool(["test", "rules", tests])
        check("promtool test rules (store-down quiet without a store; readiness; memory budget)", code == 0,
              out.splitlines()[-1] if out else "")
        if code != 0:
            print(out)
        # The dashboard's queries, as recording rules: promtool parses each one.
        exprs = dashboard_exprs(dashboard)
        recording = os.path.join(folder, "dashboard-queries.yml")
        with open(recording, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for n, (_, expr) in enumerate(exprs):
                f.write(f"      - record: dashboard:query_{n}\n        expr: {json.dumps(grafana_to_promql(expr))}\n")
        code, out = run_promtool(["check", "rules", recording])
        check(f"the dashboard's {len(exprs)} queries parse as PromQL", code == 0, "" if code == 0 else out[-500:])


# --- 2. names used -----------------------------------------------------------------------------

NAME = re.compile(r"\bddp_bridge_[a-zA-Z0-9_]*")


def names_in(exprs, histograms):
    """`ddp_bridge_*` names outside label matchers and strings; histogram series to their base."""
    found = set()
    for expr in exprs:
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values and strings
        bare = re.sub(r"\{[^{}]*\}", "{}", bare)  # label matchers
        bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", "", bare)  # label lists
        for name in NAME.findall(bare):
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and name[: -len(suffix)] in histograms:
                    name = name[: -len(suffix)]
            found.add(name)
    return found


# --- 3. the bridge -----------------------------------------------------------------------------

def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(base, method, path, body=None, token=None, timeout=10):
    headers = {"content-type": "application/json"} if body is not None else {}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError) as error:
        return None, str(error).encode()


def read_stream(base, path, token, seconds):
    """Reads an event stream for at most `seconds` (or until a few events came); returns the bytes."""
    req = urllib.request.Request(base + path, headers={"authorization": f"Bearer {token}", "accept": "text/event-stream"})
    got = b""
    deadline = time.monotonic() + seconds
    try:
        with urllib.request.urlopen(req, timeout=seconds) as response:
            while time.monotonic() < deadline and got.count(b"event: ") < 3:
                chunk = response.read1(65536)
                if not chunk:
                    break
                got += chunk
    except (urllib.error.URLError, OSError, TimeoutError):
        pass
    return got


def refuse_one(port):
    """Holds PER_ADDRESS idle connections so one more is refused (429); returns its status line."""
    for _ in range(5):
        held = []
        try:
            for _ in range(PER_ADDRESS):
                held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
            time.sleep(0.3)  # admitted on accept; let the bridge take them all
            with socket.create_connection(("127.0.0.1", port), timeout=3) as extra:
                extra.settimeout(3)
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                line = extra.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
            if " 429 " in line + " ":
                return line
        except OSError:
            line = ""
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
    return line


def start_bridge(folder):
    port, metrics_port = free_port(), free_port()
    not_a_folder = os.path.join(folder, "not-a-folder")
    open(not_a_folder, "w").close()
    argv = [BIN, "demo", "--port", str(port), "--metrics-port", str(metrics_port), "--public-dir", "none",
            "--host", "127.0.0.1",
            "--session-key", "ab" * 32, "--data-dir", not_a_folder,
            "--max-connections-per-address", str(PER_ADDRESS),
            "--log-level", "error"]
    log = open(os.path.join(folder, "bridge.log"), "w")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return process, port, metrics_port, log


def stop_bridge(process):
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def scrape_bridge(folder):
    """Runs the bridge, makes traffic, returns the /metrics text (or None)."""
    if not os.access(BIN, os.X_OK):
        check(f"the bridge binary {BIN} exists", False, "build it first, or set DDP_BRIDGE_BIN")
        return None
    process, port, metrics_port, log = start_bridge(folder)
    base = f"http://127.0.0.1:{port}"
    try:
        ready, status = False, None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            status, _ = request(base, "GET", "/readyz", timeout=2)
            if status == 200:
                ready = True
                break
            time.sleep(0.2)
        check("the demo bridge answers GET /readyz 200 within 30 s", ready,
              f"status {status}" if process.poll() is None else f"exited with {process.returncode}")
        if not ready:
            return None

        status, body = request(base, "POST", "/v1/sessions", {"username": "alice", "password": "secret"})
        token = json.loads(body).get("token") if status == 201 else None
        check("login as alice", token is not None, f"status {status}")
        request(base, "POST", "/v1/sessions", {"username": "alice", "password": "wrong"})  # a failed login
        if token:
            status, _ = request(base, "POST", "/v1/subscriptions", {"name": "tasks"}, token)
            check("subscribe to tasks", status in (200, 201), f"status {status}")
            status, _ = request(base, "GET", "/v1/collections/tasks", token=token)
            check("read the tasks collection", status == 200, f"status {status}")
            status, body = request(base, "POST", "/v1/methods/echo", [1], token)
            check("call the echo method", status == 200, f"status {status} {body[:80]!r}")
            events = read_stream(base, "/v1/events?snapshot=true", token, 2)
            check("read the session event stream", b"event: " in events, f"{len(events)} bytes")
        status, _ = request(base, "GET", "/v1/public/collections/tasks?subscribe=tasks")
        check("a public read", status == 200, f"status {status}")
        line = refuse_one(port)
        check(f"a connection past --max-connections-per-address {PER_ADDRESS} is refused", " 429 " in line + " ", line)
        time.sleep(0.5)

        status, _ = request(base, "GET", "/metrics")
        check("GET /metrics on the API's port answers 404 (--metrics-port serves it)", status == 404, f"status {status}")
        status, body = request(f"http://127.0.0.1:{metrics_port}", "GET", "/metrics")
        check("GET /metrics on --metrics-port answers 200", status == 200, f"status {status}")
        if token:
            query_through_prometheus(port, metrics_port, token, folder)
        return body.decode(errors="replace") if status == 200 else None
    finally:
        stop_bridge(process)
        log.close()
        check("the bridge stopped", process.poll() is not None, f"status {process.returncode}")


# --- 4. Prometheus with the shipped prometheus.yml --------------------------------------------

def prometheus_api(port, path, params=None, timeout=5):
    query = ("?" + urllib.parse.urlencode(params)) if params else ""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}{query}", timeout=timeout) as response:
        return json.load(response)


def keep_busy(base, token, stop):
    """Traffic while Prometheus scrapes: reads, method calls and a short stream, one at a time."""
    while not stop.is_set():
        request(base, "POST", "/v1/methods/echo", ["busy"], token, timeout=5)
        request(base, "GET", "/v1/collections/tasks", token=token, timeout=5)
        request(base, "GET", "/v1/public/collections/tasks?subscribe=tasks", timeout=5)
        stop.wait(0.5)


def query_through_prometheus(bridge_port, metrics_port, token, folder):
    binary = shutil.which("prometheus")
    if binary is None:
        skip("Prometheus scrapes the bridge and answers the dashboard's queries", "prometheus is not installed (apt-get install prometheus)")
        return
    try:
        dashboard = json.load(open(DASHBOARD))
        text = open(PROMETHEUS_CONFIG).read()
    except (OSError, ValueError) as error:
        check("read prometheus.yml and the dashboard", False, str(error))
        return
    home = os.path.join(folder, "prometheus")
    os.makedirs(home)
    text, replaced = re.subn(r'(targets:\s*\[)"ddp-bridge:9091"(\])', rf'\g<1>"127.0.0.1:{metrics_port}"\2', text)
    check("prometheus.yml's target replaced by the test bridge's metrics address (nothing else changed)", replaced == 1,
          f"ddp-bridge:9091 -> 127.0.0.1:{metrics_port}" if replaced == 1 else "no `targets: [\"ddp-bridge:9091\"]` line")
    config = os.path.join(home, "prometheus.yml")
    with open(config, "w") as f:
        f.write(text)
    shutil.copy(RULES, home)  # beside it, as the compose profile mounts it
    job = re.search(r"job_name:\s*(\S+)", text).group(1)
    scrape = float(re.search(r"scrape_interval:\s*(\d+)s", text).group(1))
    alerts = len(re.findall(r"^\s*- alert:", open(RULES).read(), re.M))
    port = free_port()
    log = open(os.path.join(home, "prometheus.log"), "w")
    argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(home, 'data')}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    stop = threading.Event()
    busy = threading.Thread(target=keep_busy, args=(f"http://127.0.0.1:{bridge_port}", token, stop), daemon=True)
    busy.start()
    started = time.monotonic()

    def until(predicate, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and process.poll() is None:
            try:
                value = predicate()
            except (OSError, ValueError, KeyError, urllib.error.URLError):
                value = None
            if value:
                return value
            time.sleep(0.5)
        return None

    try:
        ready = until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2).status == 200, 30)
        check(f"Debian's Prometheus runs with the shipped prometheus.yml ({os.path.basename(binary)} on 127.0.0.1:{port})", bool(ready),
              "" if ready else f"exit {process.poll()}: " + open(os.path.join(home, "prometheus.log")).read()[-300:])
        if not ready:
            return

        def target_up():
            targets = prometheus_api(port, "/api/v1/targets")["data"]["activeTargets"]
            return [t for t in targets if t["health"] == "up" and t["labels"].get("job") == job]

        up = until(target_up, 2 * scrape + 15)
        check(f"the target 127.0.0.1:{metrics_port} (job {job}) is scraped and up", bool(up),
              f"after {time.monotonic() - started:.0f} s (scrape interval {scrape:.0f} s)" if up else "not up")
        groups = until(lambda: prometheus_api(port, "/api/v1/rules")["data"]["groups"], 10) or []
        loaded = [r for g in groups for r in g["rules"] if r.get("type") == "alerting"]
        check(f"the {alerts} alert rules are loaded and evaluate without error", len(loaded) == alerts and all(r.get("health") != "err" for r in loaded),
              f"{len(loaded)} alerting rules in {len(groups)} groups" + "".join(f"; {r['name']}: {r.get('lastError')}" for r in loaded if r.get("health") == "err"))

        queries = []
        for title, expr in dashboard_exprs(dashboard):
            filled = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$job", job).replace("$instance", ".+")
            queries.append((title, expr, filled))
        answers = {}

        def all_answer():
            for title, expr, filled in queries:
                if answers.get(filled):
                    continue
                body = prometheus_api(port, "/api/v1/query", {"query": filled})
                if body.get("status") == "success" and body["data"]["result"]:
                    answers[filled] = body["data"]["result"]
            return len(answers) == len({q[2] for q in queries})

        # Rates need two scrapes inside their window: at most two intervals after the first.
        until(all_answer, 3 * scrape + 15)
        for title, expr, filled in queries:
            result = answers.get(filled)
            sample = ""
            if result:
                labels = {k: v for k, v in result[0]["metric"].items() if k not in ("job", "instance")}
                sample = f"{len(result)} series, e.g. {labels or '{}'} = {result[0]['value'][1]}"
            check(f"panel '{title}': {filled[:90]}{'…' if len(filled) > 90 else ''} returns data", bool(result), sample or "empty after the wait")
        print(f"INFO Prometheus: {len(answers)} of {len({q[2] for q in queries})} distinct queries answered "
              f"{time.monotonic() - started:.0f} s after it started", flush=True)
    finally:
        stop.set()
        busy.join(timeout=10)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()
        check("Prometheus stopped", process.poll() is not None, f"status {process.returncode}")


def exported_names(text):
    types, samples = {}, set()
    for line in text.splitlines():
        m = re.match(r"^# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            samples.add(re.split(r"[{\s]", line, 1)[0])
    return types, samples


def main():
    os.chdir(ROOT)
    try:
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        check("the dashboard is JSON", True)
    except (OSError, ValueError) as error:
        check("the dashboard is JSON", False, str(error))
        dashboard = {}
    try:
        with open(RULES) as f:
            rules_text = f.read()
    except OSError as error:
        check("the rules file is readable", False, str(error))
        rules_text = ""

    check_promtool(dashboard)

    with tempfile.TemporaryDirectory(prefix="check-observability-") as folder:
        metrics = scrape_bridge(folder)

    types, samples = exported_names(metrics or "")
    histograms = {name for name, kind in types.items() if kind == "histogram"} or {"ddp_bridge_method_duration_seconds"}
    in_dashboard = names_in([e for _, e in dashboard_exprs(dashboard)], histograms)
    in_rules = names_in(rule_exprs(rules_text), histograms)
    check("the dashboard queries ddp_bridge_ metrics", len(in_dashboard) > 0, f"{len(in_dashboard)} names")
    check("the rules use ddp_bridge_ metrics", len(in_rules) > 0, f"{len(in_rules)} names")
    if metrics is not None:
        for name in sorted(in_dashboard | in_rules):
            where = " and ".join(w for w, s in (("dashboard", in_dashboard), ("rules", in_rules)) if name in s)
            exported = name in types or any(name + suffix in samples for suffix in ("", "_bucket", "_sum", "_count"))
            check(f"{name} ({where}) is exported", exported)
        unused = sorted(n for n in types if n.startswith("ddp_bridge_") and n not in in_dashboard)
        print(f"INFO exported but not on the dashboard: {', '.join(unused) if unused else 'none'}")

    print(f"observability: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
