#!/usr/bin/env python3
"""The bridge's traces as an OpenTelemetry collector receives them.

A small OTLP/HTTP receiver on loopback (POST /v1/traces, protobuf, decoded with PyPI's
`opentelemetry-proto`) stands in for a collector. The demo bridge ($DDP_BRIDGE_BIN) runs with
`--otlp-endpoint` at it and a short batch delay (OTEL_BSP_SCHEDULE_DELAY). Then, with a client's
`traceparent`:
- a method call: its server span `POST /v1/methods/**` is the child of the client's span, with the
  method, route, status and path; its `ddp.method` span (kind client, `rpc.method` echo) is the
  server span's child;
- a subscription: `POST /v1/subscriptions` with its `ddp.subscribe` child (the wait for ready);
- an event stream opened with `?token=`: its span has the query with the token REDACTED, and
  ended while the stream was still open;
- the service name is `ddp-bridge` (or OTEL_SERVICE_NAME);
- the log line a request writes carries its trace and span ids (--log-format json);
- probes are not traced;
- `--otlp-endpoint` wins over OTEL_EXPORTER_OTLP_ENDPOINT (set here where nothing listens);
- a malformed `traceparent` sent with a token puts nothing of the request in the log;
- with the collector unreachable, a stop with spans to send ends within 8 s.
Then a start with OTEL_PROPAGATORS=tracecontext,baggage (which swift-otel would end the process
on) is refused with a message naming the variable. Loopback only; every wait bounded.
"""
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

BIN = os.path.abspath(os.environ.get("DDP_BRIDGE_BIN", ".build/debug/ddp-bridge"))
passed, failed = 0, 0
spans, resources = [], []
lock = threading.Lock()
arrived = threading.Condition(lock)


def check(name, ok, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + name + (f" — {detail}" if detail and not ok else ""), flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
        if ok:
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            with arrived:
                for resource_spans in request.resource_spans:
                    resources.append({a.key: a.value.string_value for a in resource_spans.resource.attributes})
                    for scope in resource_spans.scope_spans:
                        spans.extend(scope.spans)
                arrived.notify_all()
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def attributes(span):
    values = {}
    for a in span.attributes:
        v = a.value
        values[a.key] = v.string_value if v.HasField("string_value") else v.int_value if v.HasField("int_value") else str(v)
    return values


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    with arrived:
        while True:
            found = predicate()
            if found or time.monotonic() > deadline:
                return found
            arrived.wait(timeout=max(0.05, deadline - time.monotonic()))


def request(url, method="GET", body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_ready(base, seconds=10):
    """Whether the bridge at base answers /readyz 200 within seconds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if request(base + "/readyz")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    collector = f"http://127.0.0.1:{receiver.server_address[1]}"
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DDP_BRIDGE_"))}
    environment["OTEL_BSP_SCHEDULE_DELAY"] = "200"
    # A collector named in the variables too, where nothing listens: --otlp-endpoint wins over it.
    environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:1"
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"trace-check-{os.getpid()}.log")
    log = open(log_path, "w+")
    bridge = subprocess.Popen([BIN, "demo", "--port", str(port), "--public-dir", "none", "--otlp-endpoint", collector,
                               "--log-format", "json", "--log-level", "debug"],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment)
    base = f"http://127.0.0.1:{port}"
    try:
        ready = wait_ready(base)
        check("the demo bridge with --otlp-endpoint is ready", ready)
        if not ready:
            return
        trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
        status, body = request(base + "/v1/sessions", "POST", {"username": "alice", "password": "secret"},
                               {"traceparent": f"00-{trace_id}-{parent_id}-01"})
        token = json.loads(body)["token"]
        traceparent = {"traceparent": f"00-{trace_id}-{parent_id}-01", "authorization": f"Bearer {token}"}
        status, _ = request(base + "/v1/methods/echo", "POST", [1, "two"], traceparent)
        check("POST /v1/methods/echo with a traceparent answers 200", status == 200, f"status {status}")
        status, _ = request(base + "/v1/subscriptions", "POST", {"name": "tasks"}, traceparent)
        check("POST /v1/subscriptions answers 200 or 201", status in (200, 201), f"status {status}")
        request(base + "/healthz")
        # A malformed traceparent (sent twice): ignored, and nothing of the request is logged with it.
        request(base + "/v1/session", "GET", None, {"authorization": f"Bearer {token}", "traceparent": "00-zz"})
        request(base + "/v1/session", "GET", None, {"authorization": f"Bearer {token}", "traceparent": f"00-{trace_id}-{parent_id}-01, 00-{trace_id}-{parent_id}-01"})

        def named(name):
            return [s for s in spans if s.name == name and s.trace_id.hex() == trace_id]

        server = wait_for(lambda: named("POST /v1/methods/**"))
        check("the method call's server span arrives at the collector named by --otlp-endpoint (over OTEL_EXPORTER_OTLP_ENDPOINT)",
              bool(server), f"spans: {[s.name for s in spans]}")
        if server:
            span = server[0]
            values = attributes(span)
            check("its parent is the client's span (traceparent)", span.parent_span_id.hex() == parent_id,
                  f"parent {span.parent_span_id.hex()} != {parent_id}")
            check("it is a server span", span.kind == span.SPAN_KIND_SERVER, f"kind {span.kind}")
            check("it has the method, route, path and status", values.get("http.request.method") == "POST"
                  and values.get("http.route") == "/v1/methods/**" and values.get("url.path") == "/v1/methods/echo"
                  and values.get("http.response.status_code") == 200, f"{values}")
            child = wait_for(lambda: [s for s in named("ddp.method") if attributes(s).get("rpc.method") == "echo"])
            check("the upstream method call is its child span (ddp.method, rpc.method echo)",
                  bool(child) and child[0].parent_span_id == span.span_id and child[0].kind == span.SPAN_KIND_CLIENT,
                  f"{[(s.name, s.parent_span_id.hex()) for s in child]} under {span.span_id.hex()}")
            if child:
                values = attributes(child[0])
                check("the method span names the method (rpc.system ddp, rpc.method echo)",
                      values.get("rpc.system") == "ddp" and values.get("rpc.method") == "echo", f"{values}")
                check("the method span lies within the request's", child[0].start_time_unix_nano >= span.start_time_unix_nano
                      and child[0].end_time_unix_nano <= span.end_time_unix_nano)
        subscribe = wait_for(lambda: named("POST /v1/subscriptions"))
        wait = wait_for(lambda: [s for s in named("ddp.subscribe") if attributes(s).get("ddp.subscription") == "tasks"])
        check("a subscription's wait for ready is a child span of its request",
              bool(subscribe) and bool(wait) and wait[0].parent_span_id == subscribe[0].span_id,
              f"{[s.name for s in spans if s.trace_id.hex() == trace_id]}")
        with arrived:
            service = {r.get("service.name") for r in resources}
        check("the service is named ddp-bridge", service == {"ddp-bridge"}, f"{service}")
        check("probes are not traced", not any(s.name.endswith("/healthz") or s.name.endswith("/readyz") for s in spans))

        # An event stream opened with ?token=: its span ends while the stream is open, the token redacted.
        stream_trace = secrets.token_hex(16)
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.sendall((f"GET /v1/events?token={token}&collections=tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            f"traceparent: 00-{stream_trace}-{secrets.token_hex(8)}-01\r\n\r\n").encode())
        head = connection.recv(4096).decode(errors="replace")
        check("the event stream opens", head.startswith("HTTP/1.1 200"), head[:80])
        stream = wait_for(lambda: [s for s in spans if s.trace_id.hex() == stream_trace])
        connection.close()
        check("the event stream's span arrives while the stream is open (it covers the opening)", bool(stream))
        if stream:
            values = attributes(stream[0])
            check("its query has the token REDACTED", values.get("url.query", "").startswith("token=REDACTED")
                  and token not in values.get("url.query", ""), f"{values.get('url.query')}")
            check("it is named GET /v1/events", stream[0].name == "GET /v1/events", stream[0].name)
        log.flush()
        log.seek(0)
        lines = [json.loads(line) for line in log.read().splitlines() if line.startswith("{") and "session created" in line]
        check("the log line of a traced request carries its trace_id and span_id (session created)",
              bool(lines) and lines[0].get("trace_id") == trace_id and len(lines[0].get("span_id", "")) == 16, f"{lines}")
        check("no log line holds the session token (malformed traceparents sent with it)", token not in open(log_path).read())
    finally:
        bridge.terminate()
        try:
            bridge.wait(timeout=20)
        except subprocess.TimeoutExpired:
            bridge.kill()
        receiver.shutdown()
        log.close()
        os.environ.get("KEEP_TRACE_LOG") or os.unlink(log_path)

    # A collector that does not answer (nothing listens): a stop with spans to send ends within
    # a container's stop timeout (Docker's is 10 s; swift-otel alone would wait 10 s for the export).
    unreachable = {**environment, "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    bridge = subprocess.Popen([BIN, "demo", "--port", str(port), "--public-dir", "none", "--otlp-endpoint", "http://127.0.0.1:1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=unreachable)
    try:
        ready = wait_ready(base)
        request(base + "/v1/sessions", "POST", {})
        started = time.monotonic()
        bridge.terminate()
        bridge.wait(timeout=30)
        took = time.monotonic() - started
        check("with the collector unreachable, a stop with spans to send ends within 8 s", ready and took < 8, f"{took:.1f} s")
    except subprocess.TimeoutExpired:
        bridge.kill()
        check("with the collector unreachable, a stop with spans to send ends within 8 s", False, "still running after 30 s")

    # A value swift-otel would stop the process on is refused at start, naming the variable.
    environment["OTEL_PROPAGATORS"] = "tracecontext,baggage"
    done = subprocess.run([BIN, "serve", "--upstream", "ws://127.0.0.1:1/websocket", "--otlp-endpoint", collector],
                          capture_output=True, text=True, timeout=30, env=environment)
    check("OTEL_PROPAGATORS=tracecontext,baggage is refused at start (exit 64, the variable named)",
          done.returncode == 64 and "OTEL_PROPAGATORS: 'baggage' is not supported" in done.stderr,
          f"exit {done.returncode}: {done.stderr[:200]}")


main()
print(f"traces: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
