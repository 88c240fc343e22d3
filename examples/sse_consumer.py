#!/usr/bin/env python3
"""Follows a ddp-bridge session's live changes and keeps a local copy of the documents.

Standard library only. Reconnects with Last-Event-ID; on `reset` it drops its copy (a
snapshot follows), so its documents always converge to the session's. With a STATE file
the copy and the last event id are kept there, and the next run resumes from them.
Ctrl-C (or SIGTERM) prints the copy as one JSON line and exits.

    python3 examples/sse_consumer.py http://127.0.0.1:8080 "$TOKEN" --subscribe tasks
    python3 examples/sse_consumer.py http://127.0.0.1:8080 "$TOKEN" tasks-copy.json
"""
import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def events(url, token, last_id=None):
    """Yields (id, event, data) from one connection to an event stream."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
        event_id, name, data = None, "message", []
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    yield event_id, name, json.loads("\n".join(data))
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


class Copy:
    """The documents, by collection and id, and the id of the last event applied to them."""

    def __init__(self, path=None):
        self.path, self.last_id, self.documents = path, None, {}
        if path and os.path.exists(path):
            with open(path) as file:
                saved = json.load(file)
            self.last_id, self.documents = saved["lastEventId"], saved["documents"]

    def apply(self, event_id, name, data):
        if name == "reset":
            self.documents.clear()
        elif name in ("added", "changed", "removed"):
            collection = self.documents.setdefault(data["collection"], {})
            if name == "added":
                collection[data["id"]] = data["fields"]
            elif name == "changed":
                document = collection.setdefault(data["id"], {})
                document.update(data["fields"])
                for field in data["cleared"]:
                    document.pop(field, None)
            else:
                collection.pop(data["id"], None)
        # Only whole states carry an id: the documents of a snapshot have none, its marker has.
        if event_id:
            self.last_id = event_id
            self.save()

    def save(self):
        if self.path:
            with open(self.path + ".tmp", "w") as file:
                json.dump(self.json(), file)
            os.replace(self.path + ".tmp", self.path)

    def json(self):
        return {"lastEventId": self.last_id, "documents": self.documents}


def follow(base, token, copy, subscribe=None, params=None, max_events=None):
    query = {"snapshot": "true"}
    if subscribe:
        query["subscribe"] = subscribe
        if params:
            query["params"] = params
    url = f"{base}/v1/events?{urllib.parse.urlencode(query)}"
    seen = 0
    while True:
        try:
            for event_id, name, data in events(url, token, copy.last_id):
                copy.apply(event_id, name, data)
                print(f"{event_id or '-':>6} {name:<10} {json.dumps(data)}", flush=True)
                if name == "error":
                    print(f"stream ended: {data['reason']}")
                    break
                seen += 1
                if max_events and seen >= max_events:
                    return
        except urllib.error.HTTPError as error:
            print(f"refused: {error.code} {error.read().decode()}")
            return 1
        except OSError as error:
            print(f"connection lost ({error}); resuming after event {copy.last_id}")
        time.sleep(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the bridge, e.g. http://127.0.0.1:8080")
    parser.add_argument("token", help="a session token (or a Meteor login token)")
    parser.add_argument("state", nargs="?", help="a file keeping the copy and the last event id")
    parser.add_argument("--subscribe", help="a publication the stream holds while open")
    parser.add_argument("--params", help="its parameters, a JSON array")
    parser.add_argument("--max-events", type=int, help="stop after this many events")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    copy = Copy(args.state)
    code = 0
    try:
        code = follow(args.base, args.token, copy, args.subscribe, args.params, args.max_events)
    except KeyboardInterrupt:
        pass
    print(json.dumps(copy.json()), flush=True)
    sys.exit(code)
