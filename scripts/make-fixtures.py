#!/usr/bin/env python3
"""Regenerates the test fixtures from shared/ddp-transcripts (run from the repository root).

Copies the transcripts into the DDP and DDPServer test bundles and writes
server-frames.txt: every server message re-serialised compactly with key order kept,
which is byte for byte the frame the recording server sent.
"""
import json, pathlib, shutil, sys

root = pathlib.Path(__file__).resolve().parent.parent
source = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root.parent / "shared" / "ddp-transcripts"
for bundle in ["Tests/DDPTests/Fixtures", "Tests/DDPServerTests/Fixtures"]:
    target = root / bundle / "transcripts"
    target.mkdir(parents=True, exist_ok=True)
    for f in sorted(source.glob("*.jsonl")):
        shutil.copy(f, target / f.name)
frames = []
for f in sorted(source.glob("*.jsonl")):
    for line in f.read_text().splitlines():
        entry = json.loads(line)
        if entry["dir"] == "server" and "msg" in entry:
            frames.append(json.dumps(entry["msg"], separators=(",", ":"), ensure_ascii=False))
(root / "Tests/DDPTests/Fixtures/server-frames.txt").write_text("\n".join(frames) + "\n")
print(f"{len(frames)} server frames")
