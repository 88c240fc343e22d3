#!/usr/bin/env python3
"""Failover test of two ddp-bridge replicas behind HAProxy, sharing a PostgreSQL session store.

Run through scripts/failover-test.sh (it installs HAProxy and PostgreSQL when missing). All on
127.0.0.1 with ephemeral ports, in a temporary folder: a throwaway PostgreSQL cluster, the demo
DDP server, two bridge replicas (`serve --session-store postgres://… `, the key in
DDP_BRIDGE_SESSION_KEY), and HAProxy with deploy/haproxy.cfg. Then, through HAProxy only:

  1. routing: requests without a token go round robin; a session's requests (Bearer header, the
     cookie alone, or ?token=) all reach the replica that made it;
  2. a session (alice) subscribes to tasks, follows GET /v1/events?collections=tasks on a
     stream of its own and keeps a local copy from the events; writes are made; the copy must
     equal what REST returns;
  3. the replica serving the session is killed (SIGKILL); writes with the same token must still
     succeed (the other replica resumes the session from the store), tokenless requests too,
     HAProxy must take the dead replica out, the stream reconnects with Last-Event-ID, and after
     that the copy must equal REST exactly (no duplicate ids, no event for a document the copy
     did not hold), the session keeps its subscription id and its user;
  4. draining: the killed replica is started again, the serving one gets SIGTERM while a method
     call is in flight on it; the call must finish, new logins go to the other replica, the
     session and its stream move there and end equal to REST again.

Each check prints PASS or FAIL; the exit status is 1 if any failed. Every wait is bounded.
Standard library only.

Environment: DDP_BRIDGE_BIN (default .build/debug/ddp-bridge), PG_BIN (default
/usr/lib/postgresql/15/bin), HAPROXY (default haproxy), FAILOVER_STORE=none to run the replicas
without a session store (a check of the harness itself: the checks that need the store must
then FAIL), FAILOVER_PG_PASSWORD to make PostgreSQL ask for a password (SCRAM) and put it in the
store's URL (default: trust, loopback only), FAILOVER_KEEP=1 to keep the temporary folder.
"""
import argparse
import csv
import http.client
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

HOST = "127.0.0.1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(message):
    print(f"failover: {message}", flush=True)


class Checks:
    """PASS/FAIL lines, counted."""

    def __init__(self):
        self.passed, self.failed = 0, []

    def check(self, name, ok, detail=""):
        line = f"{'PASS' if ok else 'FAIL'} {name}" + (f" — {detail}" if detail else "")
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok


class Fatal(Exception):
    """A step the rest of the test cannot run without failed (already reported as FAIL)."""


class Hopeless(Exception):
    """Raised by a predicate of wait_until: what it waits for cannot happen any more."""


def wait_until(predicate, timeout, interval=0.1):
    """Calls predicate until it returns something truthy (returned) or timeout seconds pass (None)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Hopeless:
            return None
        except (OSError, http.client.HTTPException, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


class Processes:
    """Children, each in a process group of its own; their group ids are also written to a file
    so scripts/failover-test.sh can kill what is left if this driver itself is killed."""

    def __init__(self, work):
        self.work, self.children = work, {}
        self.pid_file = os.path.join(work, "pids")

    def start(self, name, argv, env=None, user=None):
        out = open(os.path.join(self.work, f"{name}.log"), "ab")
        kwargs = {}
        if user:
            kwargs.update(user=user, group=user, extra_groups=[])
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=self.work, **kwargs
        )
        out.close()
        self.children[name] = process
        with open(self.pid_file, "a") as file:
            file.write(f"{process.pid}\n")
        return process

    def log_tail(self, name, lines=15):
        try:
            with open(os.path.join(self.work, f"{name}.log"), errors="replace") as file:
                return "".join(file.readlines()[-lines:])
        except OSError:
            return ""

    @staticmethod
    def group_alive(process):
        process.poll()
        try:
            os.killpg(process.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def signal(self, name, sig):
        process = self.children[name]
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass

    def stop_all(self, timeout=6.0):
        """SIGTERM to every group (SIGINT to PostgreSQL: a fast shutdown), then SIGKILL what is left."""
        for name, process in self.children.items():
            try:
                os.killpg(process.pid, signal.SIGINT if name == "postgres" else signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(self.group_alive(p) for p in self.children.values()):
            time.sleep(0.1)
        for process in self.children.values():
            if self.group_alive(process):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def served_by(self):
        return self.headers.get("x-served-by", "-")

    def __repr__(self):
        return f"{self.status} via {self.served_by}: {self.body[:200]}"


def request(port, method, path, token=None, body=None, cookie=None, timeout=15):
    """One request on a connection of its own (so HAProxy balances each one)."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if cookie:
        headers["Cookie"] = f"ddp_bridge_session={cookie}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode("utf-8", "replace"))
    finally:
        connection.close()


class Stream(threading.Thread):
    """Follows GET /v1/events?collections=tasks&snapshot=true through HAProxy, keeps a local copy
    of the tasks, and reconnects with Last-Event-ID (as examples/sse_consumer.py does).

    Also records each connection (which replica, its status, the id it resumed from, the events
    it got) and anomalies: an `added` for a document the copy already holds, a `changed` or
    `removed` for one it does not (each would mean a replay that does not fit the copy)."""

    def __init__(self, port, token, read_timeout=5.0):
        super().__init__(daemon=True)
        self.port, self.token, self.read_timeout = port, token, read_timeout
        self.lock = threading.Lock()
        self.documents, self.last_id = {}, None
        self.connections, self.anomalies, self.errors = [], [], []
        self.stopping, self.refused = threading.Event(), threading.Event()
        self.connection = None

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.documents)), self.last_id

    def current(self):
        with self.lock:
            return dict(self.connections[-1]) if self.connections else None

    def stop(self):
        self.stopping.set()
        connection = self.connection
        if connection is not None and connection.sock is not None:
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.join(timeout=5)

    def run(self):
        path = "/v1/events?" + urllib.parse.urlencode({"collections": "tasks", "snapshot": "true"})
        while not self.stopping.is_set():
            try:
                self.follow(path)
            except (OSError, http.client.HTTPException, ValueError) as error:
                with self.lock:
                    self.errors.append(f"{type(error).__name__}: {error}")
            if not self.stopping.is_set():
                self.stopping.wait(0.3)

    def follow(self, path):
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        with self.lock:
            resumed_from = self.last_id
        if resumed_from:
            headers["Last-Event-ID"] = resumed_from
        self.connection = http.client.HTTPConnection(HOST, self.port, timeout=self.read_timeout)
        try:
            self.connection.request("GET", path, headers=headers)
            response = self.connection.getresponse()
            record = {"servedBy": response.getheader("X-Served-By", "-"), "status": response.status, "resumedFrom": resumed_from, "events": []}
            with self.lock:
                self.connections.append(record)
            if response.status != 200:
                record["body"] = response.read().decode("utf-8", "replace")[:300]
                if response.status == 401:
                    self.refused.set()  # the session is gone: reconnecting cannot help (as sse_consumer.py)
                    self.stopping.set()
                return
            event_id, name, data = None, "message", []
            while not self.stopping.is_set():
                raw = response.readline()
                if not raw:
                    return  # the stream ended (the replica died or ended it)
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if data:
                        self.apply(record, event_id, name, json.loads("\n".join(data)))
                    event_id, name, data = None, "message", []
                elif not line.startswith(":"):
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "id":
                        event_id = value
                    elif field == "event":
                        name = value
                    elif field == "data":
                        data.append(value)
        finally:
            self.connection.close()

    def apply(self, record, event_id, name, data):
        with self.lock:
            record["events"].append(name)
            if name == "reset":
                self.documents.clear()
            elif name in ("added", "changed", "removed") and data.get("collection") == "tasks":
                known = data["id"] in self.documents
                if name == "added":
                    if known:
                        self.anomalies.append(f"added {data['id']}, already held")
                    self.documents[data["id"]] = data["fields"]
                elif name == "changed":
                    if not known:
                        self.anomalies.append(f"changed {data['id']}, not held")
                    document = self.documents.setdefault(data["id"], {})
                    document.update(data["fields"])
                    for field in data.get("cleared", []):
                        document.pop(field, None)
                else:
                    if not known:
                        self.anomalies.append(f"removed {data['id']}, not held")
                    self.documents.pop(data["id"], None)
            elif name == "error":
                record["error"] = data
            # Only whole states carry an id: a snapshot's documents have none, its marker has.
            if event_id:
                self.last_id = event_id


class Test:
    def __init__(self, args):
        self.args = args
        self.checks = Checks()
        self.work = args.work
        self.procs = Processes(self.work)
        self.bin = os.path.abspath(args.bin)
        self.replicas = {}  # name -> {"port", "argv"}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DDP_BRIDGE_")}
        self.store = os.environ.get("FAILOVER_STORE", "postgres")

    # --- helpers ------------------------------------------------------------------------
    def check(self, name, ok, detail=""):
        return self.checks.check(name, ok, detail)

    def require(self, name, ok, detail=""):
        if not self.check(name, ok, detail):
            raise Fatal(name)

    def api(self, method, path, token=None, body=None, cookie=None, timeout=15):
        return request(self.proxy_port, method, path, token=token, body=body, cookie=cookie, timeout=timeout)

    def rest_tasks(self, token):
        response = self.api("GET", "/v1/collections/tasks?limit=100000", token)
        if response.status != 200 or not response.json:
            raise ValueError(f"GET /v1/collections/tasks: {response}")
        return response.json["documents"]

    def haproxy_servers(self):
        """{server name: status} from the runtime API's `show stat`."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(self.stats_socket)
            s.sendall(b"show stat\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        text = b"".join(chunks).decode().lstrip("# ")
        return {row["svname"]: row["status"] for row in csv.DictReader(io.StringIO(text)) if row["pxname"] == "bridges" and row["svname"] not in ("FRONTEND", "BACKEND")}

    def other(self, name):
        return "bridge-b" if name == "bridge-a" else "bridge-a"

    # --- the pieces ---------------------------------------------------------------------
    def capabilities(self):
        def help_of(*argv):
            try:
                result = subprocess.run([self.bin, *argv, "--help"], capture_output=True, text=True, timeout=10)
                return result.returncode, result.stdout + result.stderr
            except (OSError, subprocess.TimeoutExpired) as error:
                return 1, str(error)

        code, text = help_of("serve")
        self.require("the bridge binary runs", code == 0, self.bin if code == 0 else f"{self.bin} serve --help exited {code}: {text[-300:]}")
        self.has_store = "--session-store" in text
        # Not `demo-server --help`: an unknown subcommand is taken as serve's settings, and --help answers.
        code, text = help_of()
        self.has_demo_server = code == 0 and "demo-server" in text
        if self.store != "none":
            self.require(
                "the bridge binary supports --session-store",
                self.has_store,
                "" if self.has_store else f"{self.bin} has no --session-store (built before the session store landed); "
                "build it, or run with FAILOVER_STORE=none to exercise the harness without failover",
            )
        else:
            log("FAILOVER_STORE=none: replicas keep sessions in memory only; the checks after the kill that need the store must FAIL")

    def start_postgres(self):
        pg_bin = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
        user = "postgres" if os.geteuid() == 0 else None
        data, sockets = os.path.join(self.work, "pgdata"), os.path.join(self.work, "pgsock")
        os.makedirs(sockets)
        if user:
            import pwd

            entry = pwd.getpwnam(user)
            os.chown(sockets, entry.pw_uid, entry.pw_gid)
            os.makedirs(data)
            os.chown(data, entry.pw_uid, entry.pw_gid)
        password = os.environ.get("FAILOVER_PG_PASSWORD")
        initdb = [os.path.join(pg_bin, "initdb"), "-D", data, "-U", "postgres", "-E", "UTF8", "--no-sync", "--auth-local=trust"]
        if password:
            pwfile = os.path.join(self.work, "pgpass")
            with open(pwfile, "w") as file:
                file.write(password + "\n")
            os.chmod(pwfile, 0o644)
            initdb += ["--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            initdb += ["--auth-host=trust"]
        started = time.monotonic()
        kwargs = {"user": user, "group": user, "extra_groups": []} if user else {}
        result = subprocess.run(initdb, capture_output=True, text=True, timeout=60, cwd=self.work, **kwargs)
        self.require("initdb", result.returncode == 0, result.stderr[-500:] if result.returncode else "")
        self.pg_port = free_port()
        self.procs.start(
            "postgres",
            [os.path.join(pg_bin, "postgres"), "-D", data, "-k", sockets, "-h", HOST, "-p", str(self.pg_port), "-c", "fsync=off", "-c", "max_connections=100"],
            user=user,
        )

        def ready():
            done = subprocess.run(
                [os.path.join(pg_bin, "pg_isready"), "-q", "-h", sockets, "-p", str(self.pg_port), "-U", "postgres", "-t", "1"], capture_output=True, timeout=5
            )
            return done.returncode == 0

        ok = wait_until(ready, 20, 0.2)
        self.require("PostgreSQL is up", bool(ok), f"127.0.0.1:{self.pg_port}, {time.monotonic() - started:.1f} s" if ok else self.procs.log_tail("postgres"))
        created = subprocess.run(
            [os.path.join(pg_bin, "createdb"), "-h", sockets, "-p", str(self.pg_port), "-U", "postgres", "ddp_bridge"],
            capture_output=True, text=True, timeout=20, **kwargs,
        )
        self.require("database ddp_bridge created", created.returncode == 0, created.stderr[-300:])
        credentials = "postgres" + (":" + urllib.parse.quote(password, safe="") if password else "")
        self.store_url = f"postgres://{credentials}@{HOST}:{self.pg_port}/ddp_bridge"

    def start_ddp_server(self):
        self.ddp_port = free_port()
        if self.has_demo_server:
            argv = [self.bin, "demo-server", "--host", HOST, "--port", str(self.ddp_port)]
        else:
            # An older binary: `demo` starts the same DDP server and a bridge of its own, unused here
            # (its task toggler also flips task-a1 every 5 s, which the test tolerates).
            argv = [self.bin, "demo", "--ddp-port", str(self.ddp_port), "--host", HOST, "--port", "0", "--public-dir", "none"]
        self.procs.start("ddp-server", argv, env=self.env)
        ok = wait_until(lambda: port_open(self.ddp_port), 15)
        self.require("demo DDP server is up", bool(ok), f"ws://{HOST}:{self.ddp_port}/websocket ({argv[1]})" if ok else self.procs.log_tail("ddp-server"))

    def replica_argv(self, name):
        port = self.replicas[name]["port"]
        argv = [
            self.bin, "serve", "--upstream", f"ws://{HOST}:{self.ddp_port}/websocket", "--host", HOST, "--port", str(port),
            "--public-dir", "none", "--trusted-proxies", HOST, "--heartbeat-interval", "1", "--shutdown-grace", "5",
            "--log-level", "info",
        ]  # fmt: skip
        if self.store != "none":
            argv += ["--session-store", self.store_url]
        elif self.has_store:
            argv += ["--session-store", "memory"]
        return argv

    def start_replica(self, name):
        env = dict(self.env)
        if self.store != "none":
            env["DDP_BRIDGE_SESSION_KEY"] = self.session_key  # from the environment: not in ps
        port = self.replicas[name]["port"]
        self.procs.start(name, self.replica_argv(name), env=env)
        ok = wait_until(lambda: request(port, "GET", "/readyz", timeout=2).status == 200, 15, 0.2)
        self.require(f"{name} ready", bool(ok), f"127.0.0.1:{port}" if ok else self.procs.log_tail(name))

    def refused_store(self):
        """A store that refuses the bridge (a role PostgreSQL does not know): the log must say what
        PostgreSQL said, not that the store "did not answer in time" (the pool retries quietly)."""
        if self.store == "none" or not self.has_store:
            return
        port = free_port()
        env = dict(self.env, DDP_BRIDGE_SESSION_KEY=self.session_key)
        argv = [
            self.bin, "serve", "--upstream", f"ws://{HOST}:{self.ddp_port}/websocket", "--host", HOST, "--port", str(port),
            "--public-dir", "none", "--log-level", "info",
            "--session-store", f"postgres://nobody:wrong@{HOST}:{self.pg_port}/ddp_bridge",
        ]  # fmt: skip
        self.procs.start("refused-store", argv, env=env)
        said = wait_until(lambda: 'role \\"nobody\\" does not exist' in self.procs.log_tail("refused-store", 50)
                          or 'role "nobody" does not exist' in self.procs.log_tail("refused-store", 50), 15, 0.2)
        tail = self.procs.log_tail("refused-store", 50)
        self.check("a store that refuses the bridge: the log says what PostgreSQL said", bool(said) and "did not answer" not in tail, tail[-600:])
        self.procs.signal("refused-store", signal.SIGTERM)

    def start_haproxy(self):
        self.proxy_port = free_port()
        self.stats_socket = os.path.join(self.work, "haproxy.sock")
        env = dict(self.env)
        env.update(
            BRIDGE_A=f"{HOST}:{self.replicas['bridge-a']['port']}",
            BRIDGE_B=f"{HOST}:{self.replicas['bridge-b']['port']}",
            HAPROXY_BIND=f"{HOST}:{self.proxy_port}",
            HAPROXY_STATS_SOCKET=self.stats_socket,
            HAPROXY_NAMESERVER=f"{HOST}:53",
        )
        haproxy, config = os.environ.get("HAPROXY", "haproxy"), os.path.join(REPO, "deploy", "haproxy.cfg")
        result = subprocess.run([haproxy, "-c", "-q", "-f", config], capture_output=True, text=True, env=env, timeout=20)
        self.require("haproxy -c accepts deploy/haproxy.cfg", result.returncode == 0, (result.stdout + result.stderr)[-500:])
        self.procs.start("haproxy", [haproxy, "-db", "-f", config], env=env)
        ok = wait_until(lambda: set(self.haproxy_servers().values()) == {"UP"}, 15, 0.2)
        self.require("HAProxy up, both replicas UP by their /readyz checks", bool(ok), f"127.0.0.1:{self.proxy_port}" if ok else self.procs.log_tail("haproxy"))

    # --- the phases ---------------------------------------------------------------------
    def routing(self):
        served = [self.api("GET", "/healthz") for _ in range(6)]
        self.check(
            "requests without a token go round robin",
            all(r.status == 200 for r in served) and {r.served_by for r in served} == {"bridge-a", "bridge-b"},
            " ".join(r.served_by for r in served),
        )
        homes, strays = [], []
        for i in range(4):
            login = self.api("POST", "/v1/sessions", body={"username": "bob", "password": "hunter2"})
            if login.status != 201:
                strays.append(f"login {i}: {login}")
                continue
            token, home = login.json["token"], login.served_by
            homes.append(home)
            for via in ("bearer", "cookie", "query", "bearer"):
                path = "/v1/session" + (f"?token={urllib.parse.quote(token)}" if via == "query" else "")
                r = self.api("GET", path, token=token if via == "bearer" else None, cookie=token if via == "cookie" else None)
                if r.status != 200 or r.served_by != home:
                    strays.append(f"session {i} ({home}) by {via}: {r}")
            r = self.api("DELETE", "/v1/session", token=token)
            if r.status != 204 or r.served_by != home:
                strays.append(f"session {i} ({home}) delete: {r}")
        self.check("logins spread over both replicas", set(homes) == {"bridge-a", "bridge-b"}, " ".join(homes))
        self.check(
            "each session's requests (Bearer header, the cookie alone, or ?token=) reach the replica that made it",
            not strays and len(homes) == 4,
            f"{len(homes)} sessions × 5 requests" if not strays else "; ".join(strays[:4]),
        )

    def writes(self, token, label, expect_by=None):
        """Inserts 2 tasks, changes one, removes one, changes an older one; each must succeed."""
        results, ids = [], []
        for n in range(2):
            r = self.api("POST", "/v1/collections/tasks", token, {"text": f"{label} {n}", "listId": "failover", "done": False, "n": n})
            results.append(("insert", r))
            if r.status == 201 or (r.status == 200 and r.json):
                ids.append(r.json.get("id"))
        if ids:
            results.append(("update", self.api("PATCH", f"/v1/collections/tasks/{ids[0]}", token, {"$set": {"done": True}, "$unset": {"n": ""}})))
            results.append(("remove", self.api("DELETE", f"/v1/collections/tasks/{ids[-1]}", token)))
        if self.older:
            results.append(("update", self.api("PATCH", f"/v1/collections/tasks/{self.older}", token, {"$set": {"text": f"changed in {label}"}})))
        if ids:
            self.older = ids[0]
        bad = [f"{what}: {r}" for what, r in results if not 200 <= r.status < 300]
        where = sorted({r.served_by for _, r in results})
        ok = not bad and len(ids) == 2 and (expect_by is None or where == [expect_by])
        self.check(f"writes {label} succeed" + (f" on {expect_by}" if expect_by else ""), ok, "; ".join(bad[:3]) or f"{len(results)} writes via {','.join(where)}")
        return ok

    def converged(self, stream, token, label, timeout=15):
        """Waits until the stream's copy equals REST's tasks, then checks them exactly."""
        last = {}

        def equal():
            if stream.refused.is_set():
                raise Hopeless("the stream was refused (401)")
            documents, _ = stream.snapshot()
            rest = self.rest_tasks(token)
            last.update(copy=documents, rest=rest)
            return documents == {d["_id"]: {k: v for k, v in d.items() if k != "_id"} for d in rest}

        ok = wait_until(equal, timeout, 0.2)
        rest = last.get("rest", [])
        ids = [d["_id"] for d in rest]
        detail = f"{len(ids)} tasks, last event id {stream.snapshot()[1]}"
        if not ok:
            copy_ids, rest_ids = set(last.get("copy", {})), set(ids)
            detail = f"copy has {len(copy_ids)} (extra {sorted(copy_ids - rest_ids)[:5]}), REST {len(rest_ids)} (missing from copy {sorted(rest_ids - copy_ids)[:5]})"
        self.check(f"{label}: the stream's copy equals REST exactly", bool(ok), detail)
        self.check(f"{label}: no duplicate ids in REST's answer", len(ids) == len(set(ids)), f"{len(ids)} ids")
        with stream.lock:
            anomalies = list(stream.anomalies)
        self.check(f"{label}: every event fits the copy (no duplicate added, no change to an unknown id)", not anomalies, "; ".join(anomalies[:5]))

    def session_state(self, token, label, expected_subscription, user_id):
        r = self.api("GET", "/v1/session", token)
        subscriptions = [s.get("id") for s in (r.json or {}).get("subscriptions", [])] if r.status == 200 else []
        self.check(
            f"{label}: GET /v1/session holds the same subscription id",
            r.status == 200 and expected_subscription in subscriptions,
            f"{expected_subscription} in {subscriptions} via {r.served_by}" if r.status == 200 else repr(r),
        )
        self.check(f"{label}: the session is still alice's", r.status == 200 and (r.json or {}).get("userId") == user_id, f"userId {(r.json or {}).get('userId')}")
        who = self.api("POST", "/v1/methods/whoami", token, [])
        echo = self.api("POST", "/v1/methods/echo", token, ["hello", {"$date": 1700000000000}])
        listing = self.api("GET", "/v1/collections", token)
        self.check(
            f"{label}: REST calls work (whoami, echo, GET /v1/collections)",
            who.status == 200 and (who.json or {}).get("result") == user_id
            and echo.status == 200 and (echo.json or {}).get("result") == ["hello", {"$date": 1700000000000}]
            and listing.status == 200 and any(c.get("name") == "tasks" for c in listing.json or []),
            f"whoami {who.status} {(who.json or {}).get('result')}, echo {echo.status}, collections {listing.status}",
        )  # fmt: skip

    def wait_stream_on(self, stream, replica, since, timeout=15):
        """Waits for a connection after index `since`, answered 200 by `replica`, that finished a snapshot or replayed."""

        def attached():
            with stream.lock:
                for record in stream.connections[since:]:
                    if record["servedBy"] == replica and record["status"] == 200 and record["events"]:
                        return dict(record)
            if stream.refused.is_set():
                raise Hopeless("the stream was refused (401)")  # ends the wait at once
            return None

        return wait_until(attached, timeout, 0.1)

    def failover(self):
        login = self.api("POST", "/v1/sessions", body={"username": "alice", "password": "secret"})
        self.require(
            "alice logs in through HAProxy",
            login.status == 201 and login.json and login.json.get("token"),
            f"via {login.served_by}, userId {(login.json or {}).get('userId')}" if login.status == 201 else repr(login),
        )
        token, user_id, home = login.json["token"], login.json.get("userId"), login.served_by
        subscribed = self.api("POST", "/v1/subscriptions", token, {"name": "tasks"})
        self.require(
            "subscribed to tasks", subscribed.status == 201 and (subscribed.json or {}).get("state") == "ready", f"{subscribed.status} via {subscribed.served_by}"
        )
        subscription = subscribed.json["id"]
        self.check("login and subscription on one replica", subscribed.served_by == home, f"{home}, subscription {subscription}")
        self.session_state(token, "before failover", subscription, user_id)

        stream = Stream(self.proxy_port, token)
        stream.start()
        self.streams.append(stream)
        first = self.wait_stream_on(stream, home, 0, 10)
        self.require("the event stream opens on the session's replica", bool(first), f"{home}: {first and first['events'][:6]}" if first else repr(stream.connections))
        self.older = None
        self.writes(token, "before failover", expect_by=home)
        self.converged(stream, token, "before failover")

        # Kill the replica that holds the session, without warning.
        victim, survivor = home, self.other(home)
        connections_before = len(stream.connections)
        process = self.procs.children[victim]
        killed_at = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        try:
            process.wait(timeout=5)
            dead = True
        except subprocess.TimeoutExpired:
            dead = False
        self.require(f"{victim} killed (SIGKILL)", dead, f"pid {process.pid}, exit {process.returncode}")

        # At once, before HAProxy's checks could notice: the same token, writes and reads.
        self.writes(token, "after failover", expect_by=survivor)
        after = time.monotonic() - killed_at
        served = [self.api("GET", "/healthz") for _ in range(4)]
        self.check(
            "requests without a token all answered by the live replica (redispatched)",
            all(r.status == 200 and r.served_by == survivor for r in served),
            " ".join(f"{r.status}/{r.served_by}" for r in served) + f" ({after:.2f} s after the kill)",
        )
        down = wait_until(lambda: self.haproxy_servers().get(victim, "").startswith("DOWN") and self.haproxy_servers(), 4, 0.1)
        self.check(f"HAProxy marks {victim} DOWN", bool(down), f"{down} after {time.monotonic() - killed_at:.1f} s" if down else repr(self.haproxy_servers()))

        moved = self.wait_stream_on(stream, survivor, connections_before, 15)
        with stream.lock:
            attempts = stream.connections[connections_before:]
        self.check(
            f"the stream reconnects through HAProxy to {survivor} with Last-Event-ID",
            bool(moved) and bool(moved.get("resumedFrom")),
            (f"resumed from {moved['resumedFrom']}: {'reset + snapshot' if 'reset' in moved['events'] else 'replayed'}; "
             f"{len(attempts)} attempt(s): " + ", ".join(f"{a['status']}/{a['servedBy']}" for a in attempts))
            if moved else "attempts: " + "; ".join(f"{a['status']}/{a['servedBy']} {a.get('body', '')[:120]}" for a in attempts[-4:]),
        )  # fmt: skip
        self.writes(token, "after the stream moved", expect_by=survivor)
        self.converged(stream, token, "after failover")
        self.session_state(token, "after failover", subscription, user_id)
        return token, user_id, subscription, stream, victim, survivor

    def drain(self, token, user_id, subscription, stream, restarted, draining):
        """The killed replica comes back; the serving one is stopped gracefully while a call runs on it."""
        self.start_replica(restarted)
        up = wait_until(lambda: self.haproxy_servers().get(restarted) == "UP", 10, 0.2)
        self.require(f"HAProxy puts {restarted} back UP after its checks pass", bool(up), repr(self.haproxy_servers()))
        # The session moved to the survivor when its replica died; it must stay there (each move
        # costs a resume and a reset of the open streams), not follow the old entry back.
        stays = [self.api("GET", "/v1/session", token) for _ in range(3)]
        self.check(
            f"the session stays on {draining} after {restarted} is back",
            all(r.status == 200 and r.served_by == draining for r in stays),
            " ".join(f"{r.status}/{r.served_by}" for r in stays),
        )

        # A session of its own on the draining replica, with a 3 s method call in flight.
        pinned = None
        for _ in range(4):
            login = self.api("POST", "/v1/sessions", body={"username": "bob", "password": "hunter2"})
            if login.status == 201 and login.served_by == draining:
                pinned = login.json["token"]
                break
        self.require(f"a session on {draining} for the in-flight call", bool(pinned), "")
        outcome = {}

        def long_call():
            started = time.monotonic()
            try:
                outcome["response"] = self.api("POST", "/v1/methods/sleep", pinned, [3000], timeout=20)
            except (OSError, http.client.HTTPException) as error:
                outcome["error"] = repr(error)
            outcome["took"] = time.monotonic() - started

        caller = threading.Thread(target=long_call, daemon=True)
        caller.start()
        time.sleep(0.5)
        connections_before = len(stream.connections)
        self.procs.signal(draining, signal.SIGTERM)
        stopped_at = time.monotonic()

        down = wait_until(lambda: self.haproxy_servers().get(draining, "").startswith(("DOWN", "MAINT")) and self.haproxy_servers(), 5, 0.1)
        self.check(f"HAProxy takes the draining {draining} out", bool(down), f"{down} after {time.monotonic() - stopped_at:.1f} s" if down else repr(self.haproxy_servers()))
        logins = [self.api("POST", "/v1/sessions", body={"username": "bob", "password": "hunter2"}) for _ in range(3)]
        self.check(
            f"new sessions go to {restarted} while {draining} drains",
            all(r.status == 201 and r.served_by == restarted for r in logins),
            " ".join(f"{r.status}/{r.served_by}" for r in logins),
        )
        caller.join(timeout=20)
        response = outcome.get("response")
        self.check(
            f"the call in flight on {draining} finishes",
            response is not None and response.status == 200 and (response.json or {}).get("result") == 3000,
            f"{response!r} after {outcome.get('took', 0):.1f} s" if response else outcome.get("error", "no answer in 20 s"),
        )
        moved = self.wait_stream_on(stream, restarted, connections_before, 15)
        with stream.lock:
            ended = [c.get("error", {}).get("error") for c in stream.connections[connections_before - 1 :] if c.get("error")]
        self.check(
            f"the stream ends on {draining} and resumes on {restarted}",
            bool(moved),
            f"final event {ended or 'none (connection closed)'}; resumed from {moved['resumedFrom']}: {'reset + snapshot' if 'reset' in moved['events'] else 'replayed'}"
            if moved else repr(stream.connections[connections_before:][-3:]),
        )  # fmt: skip
        self.writes(token, "after draining", expect_by=restarted)
        self.converged(stream, token, "after draining")
        self.session_state(token, "after draining", subscription, user_id)

        # The drained replica exits by itself (0) once its grace is over, and its store took every
        # save until then (a failed save at shutdown is state another replica will not resume).
        process = self.procs.children[draining]
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.check(f"{draining} exits 0 after draining", code == 0, f"exit status {code}" if code is not None else "still running 10 s later")
        failures = [line.strip() for line in self.procs.log_tail(draining, 400).splitlines() if "session store failed" in line]
        self.check(f"{draining} shut down without session-store errors", not failures, failures[0][:400] if failures else "")

    def run(self):
        started = time.monotonic()
        self.streams = []
        try:
            self.capabilities()
            self.session_key = secrets.token_hex(32)
            self.start_postgres()
            self.start_ddp_server()
            self.refused_store()
            self.replicas = {name: {"port": free_port()} for name in ("bridge-a", "bridge-b")}
            for name in self.replicas:
                self.start_replica(name)
            self.start_haproxy()
            self.routing()
            token, user_id, subscription, stream, victim, survivor = self.failover()
            self.drain(token, user_id, subscription, stream, victim, survivor)
        except Fatal as error:
            log(f"stopped after a failed step: {error}")
        except Exception:  # noqa: BLE001 — reported as a failure, then cleaned up
            self.check("no unexpected error", False, traceback.format_exc().strip().splitlines()[-1])
            traceback.print_exc()
        finally:
            for stream in self.streams:
                stream.stop()
            if self.checks.failed:
                for name in ("bridge-a", "bridge-b", "haproxy", "ddp-server", "postgres"):
                    tail = self.procs.log_tail(name, 12)
                    if tail:
                        print(f"--- last lines of {name}.log\n{tail}", end="" if tail.endswith("\n") else "\n")
            self.procs.stop_all()
        log(f"{self.checks.passed} passed, {len(self.checks.failed)} failed, {time.monotonic() - started:.1f} s")
        return 1 if self.checks.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="a folder for logs and data (default: a new temporary one)")
    parser.add_argument("--bin", default=os.environ.get("DDP_BRIDGE_BIN", os.path.join(REPO, ".build/debug/ddp-bridge")))
    args = parser.parse_args()
    made = args.work is None
    if made:
        args.work = tempfile.mkdtemp(prefix="ddp-failover-")
    os.chmod(args.work, 0o755)  # PostgreSQL runs as its own user and needs to reach its folders
    # SIGTERM (from timeout or the shell's trap) ends the test the way Ctrl-C does: cleanly.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    test = Test(args)
    try:
        code = test.run()
    except KeyboardInterrupt:
        test.procs.stop_all()
        log(f"interrupted: every process stopped ({test.checks.passed} passed, {len(test.checks.failed)} failed so far)")
        code = 130
    if made and not os.environ.get("FAILOVER_KEEP"):
        subprocess.run(["rm", "-rf", args.work], check=False)
    elif made:
        log(f"kept {args.work}")
    sys.exit(code)


if __name__ == "__main__":
    main()
