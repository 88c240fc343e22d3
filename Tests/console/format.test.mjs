// What the console shows: values in cells, errors, labels.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ApiError, parseJSON, query, wireId } from "../../public/api.js";
import {
  captionText, connectionLabel, describeError, displayId, formatValue, logText, methodErrorText, subscriptionLabel, userLabel,
} from "../../public/js/format.js";

test("cell values: dates as ISO 8601, everything else as JSON", () => {
  assert.equal(formatValue({ $date: 1704067200000 }), "2024-01-01T00:00:00.000Z");
  assert.equal(formatValue({ $date: 5, extra: 1 }), '{"$date":5,"extra":1}');
  assert.equal(formatValue("text"), '"text"');
  assert.equal(formatValue({ a: [1, null] }), '{"a":[1,null]}');
  assert.equal(formatValue(undefined), "undefined");
});

test("ids: strings as they are, others as JSON", () => {
  assert.equal(displayId("task-a1"), "task-a1");
  assert.equal(displayId({ $type: "oid", $value: "0123456789abcdef01234567" }), '{"$type":"oid","$value":"0123456789abcdef01234567"}');
  assert.equal(displayId(5), "5");
});

test("errors: the bridge's shape, or a message", () => {
  const error = new ApiError(403, { error: 403, reason: "Incorrect password", message: "Incorrect password [403]", details: null });
  assert.equal(describeError(error), "403: Incorrect password", "a Meteor code equal to the status is shown once");
  assert.equal(describeError(new ApiError(403, { error: "403", reason: "Incorrect password", details: null })), "403: Incorrect password");
  assert.equal(describeError(new ApiError(400, { error: "bad-thing", reason: "it broke", details: null })), "400 bad-thing: it broke");
  assert.equal(describeError(new ApiError(401, { error: "no-session", reason: "Log in", details: null })), "401 no-session: Log in");
  const offline = new ApiError(0, { error: "network", reason: "The bridge could not be reached (down)", details: null });
  assert.equal(describeError(offline), "network: The bridge could not be reached (down)");
  assert.equal(describeError(new Error("boom")), "boom");
  assert.equal(describeError("plain"), "plain");
  assert.equal(new ApiError(502, null).body.reason, "HTTP 502");
});

test("a method's error lists status, error, reason and details", () => {
  const error = new ApiError(400, { error: "bad-thing", reason: "it broke", details: { at: 1 } });
  assert.equal(methodErrorText(error), 'status: 400\nerror: "bad-thing"\nreason: it broke\ndetails: {\n  "at": 1\n}');
  assert.equal(methodErrorText(new Error("offline")), 'status: -\nerror: "client"\nreason: offline\n');
});

test("labels: subscription, connection with its countdown, user, caption", () => {
  assert.equal(subscriptionLabel({ id: "s", name: "tasks", params: ["inbox", 2], state: "ready", reason: null }), 'tasks("inbox", 2)');
  assert.deepEqual(connectionLabel(null, 0), { state: "none", text: "no session" });
  assert.deepEqual(connectionLabel({ connection: { state: "connected" } }, 0), { state: "connected", text: "connected" });
  const reconnecting = { connection: { state: "reconnecting", attempt: 3, retryIn: 2500 } };
  assert.deepEqual(connectionLabel(reconnecting, 1000, 1000), { state: "reconnecting", text: "reconnecting in 3 s (attempt 3)" });
  assert.deepEqual(connectionLabel(reconnecting, 3000, 1000), { state: "reconnecting", text: "reconnecting in 1 s (attempt 3)" });
  assert.deepEqual(connectionLabel(reconnecting, 9000, 1000), { state: "reconnecting", text: "reconnecting in 0 s (attempt 3)" });
  assert.deepEqual(connectionLabel({ connection: { state: "stream-reconnecting" } }, 0), { state: "connecting", text: "stream reconnecting…" });
  assert.equal(userLabel(null), "not logged in");
  assert.equal(userLabel({ userId: null, connection: { state: "connected" } }), "anonymous");
  assert.equal(userLabel({ userId: "u1", username: "alice", connection: { state: "connected" } }), "user alice");
  assert.equal(userLabel({ userId: "u1", connection: { state: "connected" } }), "user u1");
  assert.equal(captionText(null, 0, "idle"), "Select a collection");
  assert.equal(captionText("tasks", 1, "live"), "tasks: 1 matching document");
  assert.equal(captionText("tasks", 3, "live"), "tasks: 3 matching documents");
  assert.equal(captionText("tasks", 0, "loading"), "tasks: loading…");
});

test("the log cuts long events", () => {
  assert.equal(logText("short"), "short");
  assert.equal(logText("x".repeat(401)), `${"x".repeat(400)}…`);
});

test("the API helpers: query strings, wire ids, typed JSON", () => {
  assert.equal(query({ selector: '{"a":1}', empty: "", none: null, skip: 0 }), "?selector=%7B%22a%22%3A1%7D&skip=0");
  assert.equal(query({}), "");
  assert.equal(wireId("plain"), "plain");
  assert.equal(wireId("-dash"), "--dash");
  assert.equal(wireId("0123456789abcdef01234567"), "-0123456789abcdef01234567");
  assert.equal(wireId({ $type: "oid", $value: "0123456789abcdef01234567" }), "0123456789abcdef01234567");
  assert.equal(wireId(true), "~true");
  assert.deepEqual(parseJSON(" ", "X"), { value: undefined });
  assert.deepEqual(parseJSON("[1]", "X", (v) => (Array.isArray(v) ? null : "no")), { value: [1] });
  assert.deepEqual(parseJSON("{}", "X", (v) => (Array.isArray(v) ? null : "must be a JSON array")), { error: "X: must be a JSON array" });
  assert.match(parseJSON("{", "X").error, /^X is not valid JSON/);
});
