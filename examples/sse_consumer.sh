#!/bin/sh
# Follows a ddp-bridge session's live changes with curl -N and keeps a local copy with jq.
# After each event with an id it prints the copy as one JSON line, {"event", "lastEventId",
# "documents": {collection: {id: fields}}}: the last line is the current state. With a STATE
# file it keeps that line there, and the next run resumes from it with Last-Event-ID.
#
#     examples/sse_consumer.sh http://127.0.0.1:8080 "$TOKEN" [STATE]
set -eu
bridge=$1 token=$2 state=${3:-}
saved=/dev/null
if [ -n "$state" ] && [ -s "$state" ]; then saved=$state; fi

# curl leaves out a header whose value is empty: the first run asks for a snapshot only.
curl -sSN "$bridge/v1/events?snapshot=true" -H "Authorization: Bearer $token" \
    -H "Last-Event-ID: $(jq -r '.lastEventId // empty' "$saved")" |
jq -nRc --unbuffered --slurpfile saved "$saved" '
  def apply($event; $d):
    if   $event == "added"   then .[$d.collection][$d.id] = $d.fields
    elif $event == "changed" then .[$d.collection][$d.id] |= ((. // {}) + $d.fields | delpaths([$d.cleared[] | [.]]))
    elif $event == "removed" then del(.[$d.collection][$d.id])
    elif $event == "reset"   then {}
    else . end;
  # One SSE line at a time; a blank line ends an event. Only whole states carry an id (the
  # documents of a snapshot have none, its marker has), so only those are printed.
  foreach (inputs | rtrimstr("\r")) as $line (
    {documents: ($saved[0].documents // {}), event: "message", id: null, data: null};
    if .done then {documents} + {event: "message", id: null, data: null} else . end
    | if $line == "" and .data != null then . as $s | .documents |= apply($s.event; $s.data) | .done = true
      elif ($line | startswith("id: ")) then .id = $line[4:]
      elif ($line | startswith("event: ")) then .event = $line[7:]
      elif ($line | startswith("data: ")) then .data = ($line[6:] | fromjson)
      else . end;
    select(.done and .id) | {event, lastEventId: .id, documents})' |
while IFS= read -r copy; do
    printf '%s\n' "$copy"
    if [ -n "$state" ]; then printf '%s\n' "$copy" >"$state.tmp" && mv "$state.tmp" "$state"; fi
done
