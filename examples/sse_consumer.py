#!/usr/bin/env python3
"""Follows a ddp-bridge session's live changes and keeps a local copy of the documents.

Standard library only. Reconnects with Last-Event-ID; on `reset` it drops its copy (a
snapshot follows), so its documents always converge to the session's.

    python3 examples/sse_consumer.py http://127.0.0.1:8080 "$TOKEN" --subscribe tasks
"""
import argparse
import json
import time
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
            line = raw.decode("utf-8").rstrip("\n")
            if line == "":
                if data:
                    yield event_id, name, json.loads("\n".join(data))
                name, data = "message", []
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "id":
                    event_id = value
                elif field == "event":
                    name = value
                elif field == "data":
                    data.append(value)


def follow(base, token, subscribe=None, params=None, max_events=None):
    query = {"snapshot": "true"}
    if subscribe:
        query["subscribe"] = subscribe
        if params:
            query["params"] = params
    url = f"{base}/v1/events?{urllib.parse.urlencode(query)}"
    documents, last_id, seen = {}, None, 0
    while True:
        try:
            for event_id, name, data in events(url, token, last_id):
                last_id = event_id or last_id
                key = (data.get("collection"), json.dumps(data.get("id")))
                if name == "added":
                    documents[key] = data["fields"]
                elif name == "changed":
                    document = documents.setdefault(key, {})
                    document.update(data["fields"])
                    for field in data["cleared"]:
                        document.pop(field, None)
                elif name == "removed":
                    documents.pop(key, None)
                elif name == "reset":
                    documents.clear()
                elif name == "error":
                    print(f"stream ended: {data['reason']}")
                    break
                print(f"{event_id or '-':>6} {name:<10} {json.dumps(data)}", flush=True)
                seen += 1
                if max_events and seen >= max_events:
                    return documents
        except OSError as error:
            print(f"connection lost ({error}); resuming after event {last_id}")
        time.sleep(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the bridge, e.g. http://127.0.0.1:8080")
    parser.add_argument("token", help="a session token (or a Meteor login token)")
    parser.add_argument("--subscribe", help="a publication the stream holds while open")
    parser.add_argument("--params", help="its parameters, a JSON array")
    parser.add_argument("--max-events", type=int, help="stop after this many events")
    args = parser.parse_args()
    final = follow(args.base, args.token, args.subscribe, args.params, args.max_events)
    print(f"{len(final)} documents held")
