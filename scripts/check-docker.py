#!/usr/bin/env python3
"""Static checks of the Dockerfile and deploy/compose.yaml (no Docker engine runs on these
machines): parsed with the `dockerfile` package (Docker's own parser) and PyYAML."""
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
check(stages[0].value[0].startswith("swift:6"), "the build stage uses a Swift 6 image")
check(any(c.cmd == "RUN" and "swift build -c release" in c.value[0] for c in commands), "a release build")
check("swift" not in stages[-1].value[0], "the runtime stage is not the Swift build image")
users = [c for c in final if c.cmd == "USER"]
check(users and users[-1].value[0].split(":")[0] not in ("root", "0"), "the runtime runs as a non-root USER")
check(any(c.cmd == "HEALTHCHECK" for c in final), "a HEALTHCHECK")
check(any(c.cmd == "EXPOSE" for c in final), "an EXPOSE")
check(any(c.cmd == "ENTRYPOINT" and "ddp-bridge" in c.value[0] for c in final), "the entrypoint is ddp-bridge")
check(any(c.cmd == "COPY" and "--from=build" in c.flags for c in final), "the binary is copied from the build stage")
secret = re.compile(r"(PASSWORD|SECRET|TOKEN|API_KEY|PRIVATE_KEY)", re.IGNORECASE)
for c in commands:
    if c.cmd in ("ENV", "ARG"):
        check(not any(secret.search(v) for v in c.value), f"no secrets baked in ({c.cmd} line {c.start_line + 1})")

compose = yaml.safe_load(open("deploy/compose.yaml"))
services = compose.get("services", {})
check({"mongo", "meteor", "ddp-bridge"} <= set(services), "compose runs mongo, meteor and ddp-bridge")
bridge = services.get("ddp-bridge", {})
check(bridge.get("environment", {}).get("DDP_BRIDGE_UPSTREAM") == "ws://meteor:3000/websocket",
      "the bridge points at the app's /websocket")

for failure in failures:
    print(f"Dockerfile check failed: {failure}")
print(f"Dockerfile and compose: {checked - len(failures)} of {checked} checks passed")
sys.exit(1 if failures else 0)
