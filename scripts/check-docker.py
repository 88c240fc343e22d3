#!/usr/bin/env python3
"""Static checks of the Dockerfile, .dockerignore, deploy/compose.yaml and
deploy/compose.demo.yaml: parsed with the `dockerfile` package (Docker's own parser) and
PyYAML. No Docker engine runs on these machines; scripts/container-check.sh builds and runs
the image with podman."""
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
check(len(stages) >= 2, "multi-stage: a build stage and a runtime stage")
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


build_image, runtime_image = resolve(stages[0].value[0]), resolve(stages[-1].value[0])
check(stages[0].value[0] == "${BUILD_IMAGE}" and stages[-1].value[0] == "${RUNTIME_IMAGE}",
      "the base images are the build arguments BUILD_IMAGE and RUNTIME_IMAGE")
check(build_image.startswith("swift:6.3"), f"the build stage defaults to a Swift 6.3 image (is {build_image})")
check(runtime_image == "debian:bookworm-slim", f"the runtime stage defaults to debian:bookworm-slim (is {runtime_image})")
check("-bookworm" in build_image, "the build image is Debian bookworm, like the runtime (same C libraries)")
check(any(c.cmd == "RUN" and "swift build -c release" in c.value[0] for c in commands), "a release build")
check("swift" not in runtime_image, "the runtime stage is not the Swift build image")
users = [c for c in final if c.cmd == "USER"]
check(users and users[-1].value[0].split(":")[0] not in ("root", "0"), "the runtime runs as a non-root USER")
check(any(c.cmd == "HEALTHCHECK" for c in final), "a HEALTHCHECK")
check(any(c.cmd == "EXPOSE" for c in final), "an EXPOSE")
check(any(c.cmd == "ENTRYPOINT" and "ddp-bridge" in c.value[0] for c in final), "the entrypoint is ddp-bridge")
check(any(c.cmd == "COPY" and "--from=build" in c.flags for c in final), "the binary is copied from the build stage")
env = {}
for c in final:
    if c.cmd == "ENV":
        env.update(dict(zip(c.value[0::2], c.value[1::2])))
data_dir = env.get("DDP_BRIDGE_DATA_DIR")
check(data_dir == "/var/lib/ddp-bridge", "DDP_BRIDGE_DATA_DIR is /var/lib/ddp-bridge")
check(any(c.cmd == "VOLUME" and data_dir in c.value for c in final), "the data folder is a VOLUME")
check(any(c.cmd == "RUN" and re.search(rf"(install -d -o 10001 .*|chown[^&]*10001[^&]*){re.escape(str(data_dir))}", c.value[0])
          for c in final), "the data folder is made for uid 10001 (the bridge writes sessions.sqlite there)")
check(env.get("DDP_BRIDGE_HOST") == "0.0.0.0", "the bridge listens on all of the container's addresses")
secret = re.compile(r"(PASSWORD|SECRET|TOKEN|API_KEY|PRIVATE_KEY)", re.IGNORECASE)
for c in commands:
    if c.cmd in ("ENV", "ARG"):
        check(not any(secret.search(v) for v in c.value), f"no secrets baked in ({c.cmd} line {c.start_line + 1})")

# The build context: .dockerignore keeps the build folders (gigabytes), .git and the machine's
# Package.resolved out, and lets in everything the Dockerfile copies.
try:
    ignored = [line.strip() for line in open(".dockerignore") if line.strip() and not line.startswith("#")]
except FileNotFoundError:
    ignored = []
check(ignored != [], "a .dockerignore")
for pattern in (".build", ".build-*", ".git", "Package.resolved"):
    check(pattern in ignored, f".dockerignore leaves out {pattern}")
for c in commands:
    if c.cmd in ("COPY", "ADD") and not any(f.startswith("--from") for f in c.flags):
        for source in c.value[:-1]:
            check(source.split("/")[0] not in ignored, f"{c.cmd} {source} (line {c.start_line + 1}) is not left out by .dockerignore")

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
check(set(demo_services) == {"meteor", "ddp-bridge"}, "the demo compose runs meteor and ddp-bridge only (no mongo)")
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

for failure in failures:
    print(f"Dockerfile check failed: {failure}")
print(f"Dockerfile, .dockerignore and compose files: {checked - len(failures)} of {checked} checks passed")
sys.exit(1 if failures else 0)
