#!/usr/bin/env python3
"""Static checks of the Dockerfile, .dockerignore, deploy/compose.yaml and
deploy/compose.demo.yaml: parsed with the `dockerfile` package (Docker's own parser) and
PyYAML. No Docker engine runs on these machines; scripts/container-check.sh builds and runs
the image with podman."""
import os
import re
import sys

import dockerfile
import yaml

failures = []
checked = 0


def check(condition, message):
    global checked
    checked += 1
    if not condition:
        failures.append(message)


commands = dockerfile.parse_file("Dockerfile")
stages = [c for c in commands if c.cmd == "FROM"]
check(len(stages) == 2, "two stages: the image's few files made on Debian, then the packaged binary on an empty image")
final = [c for c in commands if c.start_line > stages[-1].start_line]

# The base images are build arguments (ARG before the first FROM), so local stand-ins can
# replace them; their defaults are the official images.
global_args = {}
for c in commands:
    if c.cmd == "FROM":
        break
    if c.cmd == "ARG":
        for item in c.value:
            name, _, default = item.partition("=")
            global_args[name] = default


def resolve(image):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: global_args.get(m.group(1) or m.group(2), m.group(0)), image)


files_image = resolve(stages[0].value[0])
check(stages[0].value[0] == "${BASE_IMAGE}", "the files stage's base is the build argument BASE_IMAGE")
check(files_image == "debian:bookworm-slim", f"BASE_IMAGE defaults to debian:bookworm-slim (is {files_image})")
check(stages[-1].value[0] == "scratch", "the image is the binary on an empty base (FROM scratch): no shell, no libraries")
check(any(c.cmd == "COPY" and "--from=files" in c.flags and c.value[-1] == "/" for c in final),
      "the files stage's root is copied in (certificates, user, data folder)")
check(not any(c.cmd == "RUN" and "swift " in c.value[0] for c in commands), "nothing is built in the image: the binary is scripts/package.sh's")
users = [c for c in final if c.cmd == "USER"]
check(users and users[-1].value[0].split(":")[0] not in ("root", "0"), "the runtime runs as a non-root USER")
check(any(c.cmd == "HEALTHCHECK" for c in final), "a HEALTHCHECK")
check(any(c.cmd == "EXPOSE" for c in final), "an EXPOSE")
check(any(c.cmd == "ENTRYPOINT" and "ddp-bridge" in c.value[0] for c in final), "the entrypoint is ddp-bridge")
check(any(c.cmd == "COPY" and c.value[0] == "dist/ddp-bridge" and c.value[-1] == "/usr/local/bin/ddp-bridge" for c in final),
      "the binary is scripts/package.sh's dist/ddp-bridge")
env = {}
for c in final:
    if c.cmd == "ENV":
        env.update(dict(zip(c.value[0::2], c.value[1::2])))
data_dir = env.get("DDP_BRIDGE_DATA_DIR")
check(data_dir == "/var/lib/ddp-bridge", "DDP_BRIDGE_DATA_DIR is /var/lib/ddp-bridge")
check(any(c.cmd == "VOLUME" and data_dir in c.value for c in final), "the data folder is a VOLUME")
check(any(c.cmd == "RUN" and re.search(rf"chown 10001:10001 /rootfs{re.escape(str(data_dir))}\b", c.value[0])
          for c in commands), "the data folder is made for uid 10001 (the bridge writes sessions.sqlite there)")
check(any(c.cmd == "COPY" and "--chown=10001:10001" in c.flags and c.value[-1] == data_dir for c in final),
      "the data folder is copied in owned by uid 10001, whatever the builder does with owners")
check(any(c.cmd == "RUN" and "ca-certificates.crt /rootfs/etc/ssl/certs/" in c.value[0] for c in commands),
      "the CA certificates are in the image (a wss:// upstream)")
check(env.get("DDP_BRIDGE_HOST") == "0.0.0.0", "the bridge listens on all of the container's addresses")
secret = re.compile(r"(PASSWORD|SECRET|TOKEN|API_KEY|PRIVATE_KEY)", re.IGNORECASE)
for c in commands:
    if c.cmd in ("ENV", "ARG"):
        check(not any(secret.search(v) for v in c.value), f"no secrets baked in ({c.cmd} line {c.start_line + 1})")

# The build context: .dockerignore sends the packaged binary only (not the build folders'
# gigabytes, .git or the checkout), and every file the Dockerfile copies is that binary.
try:
    ignored = [line.strip() for line in open(".dockerignore") if line.strip() and not line.startswith("#")]
except FileNotFoundError:
    ignored = []
check(ignored == ["*", "!dist/ddp-bridge"], f".dockerignore leaves out everything but dist/ddp-bridge ({ignored})")
for c in commands:
    if c.cmd in ("COPY", "ADD") and not any(f.startswith("--from") for f in c.flags):
        for source in c.value[:-1]:
            check(source == "dist/ddp-bridge", f"{c.cmd} {source} (line {c.start_line + 1}) is the one file .dockerignore lets in")

compose = yaml.safe_load(open("deploy/compose.yaml"))
services = compose.get("services", {})
check({"mongo", "meteor", "ddp-bridge"} <= set(services), "compose runs mongo, meteor and ddp-bridge")
bridge = services.get("ddp-bridge", {})
check(bridge.get("environment", {}).get("DDP_BRIDGE_UPSTREAM") == "ws://meteor:3000/websocket",
      "the bridge points at the app's /websocket")

# The demo compose file: the same bridge service, the image's own demo DDP server in place of
# the Meteor app, no MongoDB.
demo = yaml.safe_load(open("deploy/compose.demo.yaml"))
demo_services = demo.get("services", {})
always = {name for name, service in demo_services.items() if not service.get("profiles")}
check(always == {"meteor", "ddp-bridge"}, "the demo compose runs meteor and ddp-bridge only (no mongo) without a profile")
demo_bridge = demo_services.get("ddp-bridge", {})
demo_meteor = demo_services.get("meteor", {})
# Each names the public origin where it is published (the demo's follows DDP_BRIDGE_DEMO_PORT).
def without_origin(environment):
    return {k: v for k, v in (environment or {}).items() if k != "DDP_BRIDGE_PUBLIC_ORIGIN"}
check(without_origin(demo_bridge.get("environment")) == without_origin(bridge.get("environment")),
      "the demo's bridge has the settings of deploy/compose.yaml's (its public origin aside)")
check(all("DDP_BRIDGE_PUBLIC_ORIGIN" in (b.get("environment") or {}) for b in (bridge, demo_bridge)),
      "both compose files name the bridge's public origin")
check(demo_meteor.get("image") == demo_bridge.get("image"), "the demo's meteor runs the bridge's image")
check(demo_meteor.get("command", [None])[:1] == ["demo-server"] and "--toggle" in demo_meteor.get("command", []),
      "the demo's meteor is `ddp-bridge demo-server --toggle`")
check(any(str(p).endswith(":8080") for p in demo_bridge.get("ports", [])), "the demo publishes the bridge's port 8080")


# Both compose files: sessions that survive restarts, a stop that lets the bridge finish, the
# image's health check, the commit the image is built from.
def seconds(text):
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", str(text or ""))
    return (int(m.group(1) or 0) * 60 + float(m.group(2) or 0)) if m and text else None


healthcheck = next((c for c in final if c.cmd == "HEALTHCHECK"), None)
check(healthcheck is not None and re.search(r'CMD \["/usr/local/bin/ddp-bridge", "probe"\]', healthcheck.original or "") is not None,
      "the image's HEALTHCHECK is `ddp-bridge probe` (/healthz on DDP_BRIDGE_PORT; no curl in the image)")
gitignore = open(".gitignore").read().split()
check("/.build-commit" in gitignore and "/deploy/bridge.env" in gitignore, ".gitignore leaves out .build-commit and deploy/bridge.env")
try:
    example = open("deploy/bridge.env.example").read()
except OSError:
    example = ""
check(re.search(r"^DDP_BRIDGE_SESSION_KEY=$", example, re.M) is not None,
      "deploy/bridge.env.example names DDP_BRIDGE_SESSION_KEY, with no key in it")
for label, document in (("compose.yaml", compose), ("compose.demo.yaml", demo)):
    service = document.get("services", {}).get("ddp-bridge", {})
    environment = service.get("environment") or {}
    check(not any(secret.search(k) or k == "DDP_BRIDGE_SESSION_KEY" for k in environment),
          f"{label}: no secret in the bridge's environment (the key comes from the env file)")
    env_files = service.get("env_file")
    env_files = [env_files] if isinstance(env_files, str) else (env_files or [])
    check(env_files == ["${DDP_BRIDGE_ENV_FILE:-bridge.env}"], f"{label}: the bridge reads deploy/bridge.env (or $DDP_BRIDGE_ENV_FILE) as its env file")
    volumes = [str(v) for v in service.get("volumes", [])]
    named = [v.split(":")[0] for v in volumes if v.split(":")[1:2] == [data_dir]]
    check(len(named) == 1 and named[0] in (document.get("volumes") or {}),
          f"{label}: a named volume at {data_dir} (the session store)")
    grace = seconds(service.get("stop_grace_period"))
    check(grace is not None and grace >= 30, f"{label}: stop_grace_period {service.get('stop_grace_period')} (30 s or more; the bridge's grace is 10 s)")
    check("healthcheck" not in service,
          f"{label}: the bridge keeps the image's HEALTHCHECK (a restated one runs through /bin/sh in podman-compose 1.0; the image has none)")
    check((service.get("build") or {}).get("context") == "..", f"{label}: the image is built from the repository's Dockerfile")
    metrics_port = environment.get("DDP_BRIDGE_METRICS_PORT")
    check(metrics_port is not None and not any(str(p).endswith(f":{metrics_port}") for p in service.get("ports", [])),
          f"{label}: /metrics on DDP_BRIDGE_METRICS_PORT ({metrics_port}), not published")

# The `observability` profile: the same Prometheus and Grafana in both files, wired to the shipped
# prometheus.yml, rules, Grafana provisioning and dashboard.
observability = {}
for label, document in (("compose.yaml", compose), ("compose.demo.yaml", demo)):
    services_ = document.get("services", {})
    profiled = {name for name, service in services_.items() if service.get("profiles")}
    check(profiled == {"prometheus", "grafana"} and all(services_[n]["profiles"] == ["observability"] for n in profiled),
          f"{label}: Prometheus and Grafana in the profile `observability`, nothing else in a profile")
    observability[label] = {n: services_.get(n) for n in ("prometheus", "grafana")}
    for name in ("prometheus-data", "grafana-data"):
        check(name in (document.get("volumes") or {}), f"{label}: the named volume {name}")
check(observability["compose.yaml"] == observability["compose.demo.yaml"], "the two files' observability services are the same")
services_ = compose.get("services", {})
mounts = {}
for name in ("prometheus", "grafana"):
    for volume in services_.get(name, {}).get("volumes", []):
        source, target = str(volume).split(":")[:2]
        if source.startswith("./"):
            mounts[target] = os.path.normpath(os.path.join("deploy", source))
            check(os.path.exists(mounts[target]), f"{name} mounts {source}, which exists")
    check(all(str(p).startswith("127.0.0.1:") for p in services_.get(name, {}).get("ports", [])), f"{name} is published on the host's loopback only")
prometheus_config = yaml.safe_load(open("deploy/prometheus/prometheus.yml"))
config_target = "/etc/prometheus/prometheus.yml"
check(mounts.get(config_target) == "deploy/prometheus/prometheus.yml", "Prometheus gets deploy/prometheus/prometheus.yml")
check(f"--config.file={config_target}" in services_.get("prometheus", {}).get("command", []), "Prometheus is started with that file")
for rule_file in prometheus_config.get("rule_files", []):
    check(mounts.get(os.path.join(os.path.dirname(config_target), rule_file)) == os.path.join("deploy/prometheus", rule_file),
          f"the rule file {rule_file} is mounted beside prometheus.yml")
jobs = {job["job_name"]: job for job in prometheus_config.get("scrape_configs", [])}
targets = [t for c in jobs.get("ddp-bridge", {}).get("static_configs", []) for t in c.get("targets", [])]
check(targets == [f"ddp-bridge:{bridge.get('environment', {}).get('DDP_BRIDGE_METRICS_PORT')}"],
      f"prometheus.yml's job ddp-bridge (the rules' job) scrapes the bridge's service on its metrics port ({targets})")
datasources = yaml.safe_load(open("deploy/grafana/provisioning/datasources/prometheus.yml")).get("datasources", [])
prometheus_port = str(services_.get("prometheus", {}).get("ports", ["::"])[0]).split(":")[-1]
check([d.get("url") for d in datasources] == [f"http://prometheus:{prometheus_port}"] and datasources[0].get("isDefault") is True,
      "Grafana's provisioned data source is the default, the compose service prometheus on its port")
check(mounts.get("/etc/grafana/provisioning") == "deploy/grafana/provisioning", "Grafana gets deploy/grafana/provisioning")
providers = yaml.safe_load(open("deploy/grafana/provisioning/dashboards/ddp-bridge.yml")).get("providers", [])
dashboard_dir = providers[0].get("options", {}).get("path") if providers else None
check(any(target.startswith(str(dashboard_dir) + "/") and source == "deploy/grafana/ddp-bridge.json" for target, source in mounts.items()),
      f"the dashboard provider's folder ({dashboard_dir}) holds deploy/grafana/ddp-bridge.json")

for failure in failures:
    print(f"Dockerfile check failed: {failure}")
print(f"Dockerfile, .dockerignore and compose files: {checked - len(failures)} of {checked} checks passed")
sys.exit(1 if failures else 0)
