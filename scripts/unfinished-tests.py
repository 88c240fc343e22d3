#!/usr/bin/env python3
"""Names the tests of a Swift Testing run that started and never ended.

Reads the run's output (a file, or standard input) and prints each test whose
"◇ Test NAME started." line has no "✔/✘ Test NAME ... passed/failed" (or
"skipped") line after it. scripts/test.sh calls it when a run is stopped at its
time limit, so a test that hangs is named instead of holding the run.
"""

import re
import sys

STARTED = re.compile(r"^◇ Test (?!run started|case passing)(.+?\)) started\.")
ENDED = re.compile(r"^[✔✘➜] Test (.+?\))(?: with \d+ test cases?)? .*?(passed|failed|skipped)")


def unfinished(lines):
    started = []
    ended = set()
    for line in lines:
        match = STARTED.match(line)
        if match:
            started.append(match.group(1))
            continue
        match = ENDED.match(line)
        if match:
            ended.add(match.group(1))
    return [name for name in started if name not in ended]


def main():
    source = open(sys.argv[1], encoding="utf-8", errors="replace") if len(sys.argv) > 1 else sys.stdin
    with source:
        names = unfinished(source)
    for name in names:
        print(f"  never ended: {name}")
    if not names:
        print("  every test that started ended (the run itself did not)")


if __name__ == "__main__":
    main()
