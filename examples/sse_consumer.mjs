#!/usr/bin/env node
// Follows a ddp-bridge session's live changes and keeps a local copy of the documents.
//
// Node 18 or later, no packages: fetch with a streamed body. Reconnects with Last-Event-ID; on
// `reset` it drops its copy (a snapshot follows). With a STATE file the copy and the last event
// id are kept there, and the next run resumes from them. Ctrl-C (or SIGTERM) prints the copy as
// one JSON line and exits.
//
//     node examples/sse_consumer.mjs http://127.0.0.1:8080 "$TOKEN" [STATE]
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

const [bridge, token, statePath] = process.argv.slice(2);
if (!bridge || !token) {
  console.error("usage: node sse_consumer.mjs BRIDGE TOKEN [STATE]");
  process.exit(2);
}

// The documents by collection and id, and the id of the last event applied to them.
const copy = statePath && existsSync(statePath)
  ? JSON.parse(readFileSync(statePath, "utf8"))
  : { lastEventId: null, documents: {} };

function apply({ id, event, data }) {
  if (event === "reset") copy.documents = {};
  if (["added", "changed", "removed"].includes(event)) {
    const collection = (copy.documents[data.collection] ??= {});
    if (event === "added") collection[data.id] = data.fields;
    if (event === "changed") {
      const document = (collection[data.id] = { ...collection[data.id], ...data.fields });
      for (const field of data.cleared) delete document[field];
    }
    if (event === "removed") delete collection[data.id];
  }
  // Only whole states carry an id: the documents of a snapshot have none, its marker has.
  if (id) {
    copy.lastEventId = id;
    if (statePath) {
      writeFileSync(`${statePath}.tmp`, JSON.stringify(copy));
      renameSync(`${statePath}.tmp`, statePath);
    }
  }
}

// The events of one response: {id, event, data} for each block that ends with a blank line.
async function* events(body) {
  let buffer = "";
  let block = { id: null, event: "message", data: [] };
  for await (const text of body.pipeThrough(new TextDecoderStream())) {
    buffer += text;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (block.data.length) yield { ...block, data: JSON.parse(block.data.join("\n")) };
        block = { id: null, event: "message", data: [] };
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") block.data.push(value);
        else if (field === "id" || field === "event") block[field] = value;
      }
    }
  }
}

const stop = new AbortController();
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => stop.abort());

const url = `${bridge}/v1/events?snapshot=true`;
while (!stop.signal.aborted) {
  try {
    const headers = { Authorization: `Bearer ${token}`, Accept: "text/event-stream" };
    if (copy.lastEventId) headers["Last-Event-ID"] = copy.lastEventId;
    const response = await fetch(url, { headers, signal: stop.signal });
    if (!response.ok) {
      console.log(`refused: ${response.status} ${await response.text()}`);
      process.exitCode = 1;
      break;
    }
    for await (const event of events(response.body)) {
      apply(event);
      console.log(`${(event.id ?? "-").padStart(6)} ${event.event.padEnd(10)} ${JSON.stringify(event.data)}`);
    }
    console.log(`stream ended; resuming after event ${copy.lastEventId}`);
  } catch (error) {
    if (stop.signal.aborted) break;
    console.log(`connection lost (${error.cause?.message ?? error.message}); resuming after event ${copy.lastEventId}`);
  }
  await sleep(1000, undefined, { signal: stop.signal }).catch(() => {});
}
console.log(JSON.stringify(copy));
